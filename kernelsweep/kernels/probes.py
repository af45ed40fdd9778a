"""Kernel definitions for `kernelsweep doctor --smoke`'s questions to the installed NKI (kernels/nki/probes.py).

Not built-ins: a sweep never runs them.
"""

from __future__ import annotations

from kernelsweep.kernels.matmul import Matmul


class PlusEqualsProbe(Matmul):
    name = "plus_equals_probe"
    nki_kernel = "kernelsweep.kernels.nki.probes:plus_equals_matmul"


plus_equals_probe = PlusEqualsProbe()
