"""The simulated NKI language: what the stand-in tracer runs a kernel's real source on.

`generations` holds each SDK generation's rules, `modules` builds its `nki.language` / `nki.isa`,
`lang` models the instructions (work counts, optional values through `values`), `tensor` the
tensors and tiles, and `trace` runs one kernel on them; `cycles` holds what the engines charge
that the performance model (sim.model) charges too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.sim.nki.generations import Generation, get_generation
    from kernelsweep.sim.nki.trace import trace_kernel

__all__ = ["Generation", "get_generation", "trace_kernel"]
__getattr__ = public_face(__name__, __file__)
