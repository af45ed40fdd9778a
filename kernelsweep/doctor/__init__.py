"""`kernelsweep doctor`: `host_checks` (what of the Neuron toolchain this host has, and which NKI each
family supports), and `--smoke`: `smoke` runs the real instruction mix through every tool,
`smoke_steps` holds its shared state and simpler steps, `smoke_mix` the bf16 matmul/MLP checks,
`signatures` prints the SDK's compile API in a process of its own, `risks` says what each step rules
out, `smoke_render` shows them on the terminal and in a report file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.doctor.host_checks import report
    from kernelsweep.doctor.smoke import run_smoke

__all__ = ["report", "run_smoke"]
__getattr__ = public_face(__name__, __file__)
