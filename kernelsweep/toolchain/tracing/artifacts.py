"""The one compile-to-NEFF route AWS documents for NKI 0.7, as the last resort when no other tracer
fits this host: `NKI_ARTIFACTS_DIR` set before `import nki`, then the `@nki.jit` kernel called with
NumPy arrays (aws-neuron/aws-neuron-sdk `neuron-runtime/nrtpy/tutorial-debug-neff-nrtpy.rst` @ 81ce03ae,
Step 2). "The compile options are resolved at import time", so the variable is set in the worker's
environment by the parent (kernelsweep.toolchain.tracing.job), and this tracer runs in a worker of
its own that imports nothing of the SDK before it. The NEFF is kept at `<dir>/kernel.neff` "even
though execution fails" (a NEFF elsewhere under the folder is taken too, as AWS's troubleshooting
page finds it: `find <artifacts_dir> -name "*.neff"`).

A NumPy call "compiles and executes" the kernel on a NeuronCore (nki.jit, SDK 2.33.1), so the worker
runs holding the point's core lease, with NEURON_RT_VISIBLE_CORES set to it; an execution error
after a good compile is recorded with the NEFF (`compile_options["execution"]`), not raised: the
capture stage measures the NEFF as it would any other. The call names no outputs, so the NEFF's are
mapped back by position (sg00/def.json order), as for any tracer that is not told their names.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from kernelsweep.errors import TraceError
from kernelsweep.toolchain.tracing.calls import kernel_and_inputs, nki_package_version, require
from kernelsweep.toolchain.tracing.request import TraceProducts, Tracer, TraceRequest

ARTIFACTS_ENV = "NKI_ARTIFACTS_DIR"
ARTIFACTS_FOLDER = "artifacts-route"  # in the point's work folder: what the parent points the variable at
KERNEL_NEFF = "kernel.neff"
NAME = "nki.jit/artifacts"


def _load() -> SimpleNamespace:
    import nki

    jit = nki.jit  # an AttributeError: no such route here
    return SimpleNamespace(variant="", nki_version=nki_package_version(), signatures=f"nki.jit: {jit!r}")


def _run(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    if not os.environ.get(ARTIFACTS_ENV):  # without it nki compiles into a temporary folder it deletes
        raise TraceError(f"{NAME} runs only in a worker started with {ARTIFACTS_ENV}", error_class="TracerCrash")
    api.folder = Path(os.environ[ARTIFACTS_ENV])
    kernel, inputs = kernel_and_inputs(request, workdir)
    started, execution = time.perf_counter(), "ok"
    try:
        kernel(*inputs.values())  # compiles, then executes on the leased core
    except Exception as exc:  # execution may fail on hardware; the NEFF is kept if it compiled
        neff = _neff(api.folder)
        if neff is None:
            raise
        execution = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    seconds = time.perf_counter() - started
    neff = require(_neff(api.folder) or api.folder / KERNEL_NEFF, "the @nki.jit call")
    options = {"target": request.target, "lnc": request.lnc, "route": ARTIFACTS_ENV, "execution": execution}
    return TraceProducts(api.folder, neff, seconds, options)


def _neff(folder: Path) -> Path | None:
    """kernel.neff, else the first NEFF anywhere under the folder."""
    named = folder / KERNEL_NEFF
    if named.is_file():
        return named
    return next(iter(sorted(folder.rglob("*.neff"))), None)


ARTIFACTS = Tracer(NAME, f"{__name__}:ARTIFACTS", _load, _run, executes=True)
