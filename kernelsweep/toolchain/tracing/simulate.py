"""nki.simulate: the installed NKI's own CPU interpreter of a kernel, the correctness check of
`--toolchain cpu` (a real SDK, no device).

`nki.simulate(kernel)(*arrays)` runs the kernel on NumPy and returns its outputs (NKI 0.3+; addendum
F12, F13). It targets trn1, trn2 and trn3, not inf2; it fills new tensors with NaN, so an output
tile the kernel never wrote shows up as a failed check. At LNC=2 the kernel is launched as
`kernel[2]` before NKI 0.7, which takes the LNC from NEURON_LOGICAL_NC_CONFIG (the worker sets it).
Runs inside the trace worker, after the compile succeeded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SIMULATE_TARGETS = ("trn1", "trn2", "trn3")


def simulate_outputs(request: Any, workdir: Path) -> tuple[dict[str, str], str | None]:
    """({output name: file in workdir}, None), or ({}, why there are none)."""
    if request.target not in SIMULATE_TARGETS:
        return {}, f"nki.simulate does not target {request.target}"
    try:
        import nki

        simulate = nki.simulate
    except (ImportError, AttributeError) as exc:
        return {}, f"this NKI has no nki.simulate ({type(exc).__name__}); it came with NKI 0.3"
    from kernelsweep.toolchain.tracing.calls import kernel_and_inputs, nki_at_least

    kernel, inputs = kernel_and_inputs(request, workdir)
    try:
        launch = kernel[request.lnc] if request.lnc > 1 and not nki_at_least(0, 7) else kernel
        returned = simulate(launch)(*inputs.values())
    except Exception as exc:  # the kernel's own failure under the simulator: the row says so
        return {}, f"nki.simulate raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return _write(returned, request, workdir)


def _write(returned: Any, request: Any, workdir: Path) -> tuple[dict[str, str], str | None]:
    import numpy as np

    from kernelsweep.dtypes import numpy_dtype

    arrays = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    if len(arrays) != len(request.outputs):
        return {}, f"nki.simulate returned {len(arrays)} output(s) for {len(request.outputs)}"
    files = {}
    for spec, array in zip(request.outputs, arrays, strict=True):
        array = np.asarray(array)
        if tuple(array.shape) != tuple(spec.shape):
            return {}, f"nki.simulate returned {spec.name} of shape {array.shape}, not {tuple(spec.shape)}"
        name = f"simulated-{spec.name}.bin"
        (workdir / name).write_bytes(np.ascontiguousarray(array.astype(numpy_dtype(spec.dtype))).tobytes())
        files[spec.name] = name
    return files, None
