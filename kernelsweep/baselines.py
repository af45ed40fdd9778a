"""Baselines measured the same way as the kernel: an nki-library kernel at the same point.

"Is my kernel faster than the library's?" is only answered fairly when both are traced, compiled,
captured and read by the same path: Python-side timing of a call measures its frontend, not the
kernel (nki-samples#59, #72). A kernel block names one in the spec:

    [[kernels]]
    kernel = "matmul"
    baseline = "nkilib:nkilib.core.matmul:matmul_kernel"   # an NKI kernel, module:function

The baseline NKI kernel takes the definition's inputs (by name) and returns its outputs. Each of
the block's points gets a twin: the same shape, dtype, platform and LNC, under the kernel name
`<kernel>.baseline`, whose definition is the block's own (inputs, reference, cost model) with the
baseline's NKI kernel. It runs through every stage like any point, so its latency is the profiler's,
its output is checked against the same reference, and its row says whose baseline it is
(`baseline_of`). The twin's definition is named by a kernel reference into this module
(`kernelsweep.baselines:<definition ref>@<nki kernel ref>`), which any process (the trace worker,
the simulator's tools) resolves with the ordinary `load_kernel`. Standard library only: the trace
worker imports this module.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import TYPE_CHECKING

from kernelsweep.kernels import KernelDefinition, load_kernel

if TYPE_CHECKING:
    from kernelsweep.sweepspec.point import Point

PREFIX = "nkilib:"
SUFFIX = ".baseline"
_SEPARATOR = "@"


def nki_ref(baseline: str) -> str:
    """The NKI kernel (`module:function`) a spec's `baseline` names; ValueError with the fix otherwise."""
    kernel = baseline.removeprefix(PREFIX)
    module, sep, function = kernel.partition(":")
    if not baseline.startswith(PREFIX) or not sep or not module or not function or ":" in function:
        raise ValueError(
            f"baseline {baseline!r} is not of the form 'nkilib:module:function'; name an NKI kernel that takes "
            "the definition's inputs"
        )
    return kernel


def reference(definition_ref: str, baseline: str) -> str:
    """The kernel reference of the baseline's definition, as `load_kernel` takes it."""
    return f"{__name__}:{definition_ref}{_SEPARATOR}{nki_ref(baseline)}"


def twin(point: Point, baseline: str) -> Point:
    """The baseline's point next to the kernel's: same shape, dtype, platform, LNC, toolchain and seed.
    Not the kernel's tunables (its own arguments, which the baseline does not take): one baseline point
    serves every configuration of a shape."""
    return point.model_copy(
        update={
            "kernel": point.kernel + SUFFIX,
            "kernel_ref": reference(point.kernel_ref, baseline),
            "baseline": baseline,
            "baseline_of": point.kernel,
            "tunables": {},
            "search_trial": None,
        }
    )


def __getattr__(name: str) -> KernelDefinition:
    """`load_kernel("kernelsweep.baselines:<definition ref>@<nki kernel ref>")` lands here (PEP 562)."""
    definition_ref, sep, kernel = name.rpartition(_SEPARATOR)
    if not sep or ":" not in definition_ref or ":" not in kernel:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _derived(definition_ref, kernel)


@lru_cache(maxsize=64)
def _derived(definition_ref: str, kernel: str) -> KernelDefinition:
    """The block's definition with the baseline's NKI kernel: a subclass of the definition's own
    class (its methods, its module, so its source file) named `<name>.baseline`."""
    base = load_kernel(definition_ref)
    cls = type(base)
    attributes = {"name": base.name + SUFFIX, "nki_kernel": kernel, "__module__": cls.__module__}
    subclass = type(f"{cls.__name__}Baseline", (cls,), {**attributes, "__qualname__": cls.__qualname__})
    derived = copy.copy(base)
    derived.__class__ = subclass
    return derived
