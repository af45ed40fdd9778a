"""Tracing a kernel to what the compiler takes: the step before `neuronx-cc compile`.

NKI's tracing API moved three times (reference section 0/1), so there is one thin adapter per
generation, tried newest first, and the first whose imports succeed is used:

  nki.compiler.frontend     (SDK 2.27+, NKI 0.x)  TracerFrontend -> CompiledKernel.from_frontend:
                            traces AND compiles in-process; TraceOutput.neff_path is set
  neuronxcc.nki_standalone  (2026-02)             _compile_nki_ir_to_tensorizer_ir + _write_tensorizer_ir
                            -> penguin.py for `neuronx-cc compile`
  legacy-penguin            (<= 2.26, seed 000)   KLIR TraceKernel + penguin IRBuilder/IRWriter -> penguin.py

Each adapter's imports live in its own `_load_*` function, so a host only ever imports the
generation it has, and tests replace them with stand-in modules. These are private NKI internals
no public code fully confirms; each call mirrors the one working example cited at the adapter.
A toolchain carries the tracers it offers (`Toolchain.tracers`): `TRACERS` for the real SDK, the
simulator's own (`kernelsweep.sim.tracer`) for the simulated toolchain.
"""

from __future__ import annotations

import importlib
import inspect
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from kernelsweep import names
from kernelsweep.dtypes import numpy_dtype
from kernelsweep.errors import KernelsweepError, TraceError
from kernelsweep.kernels import KernelDefinition
from kernelsweep.platforms import get_platform
from kernelsweep.spec import Point
from kernelsweep.toolchain.failures import trace_failure
from kernelsweep.toolchain.versions import SDK_PACKAGES, package_version

if TYPE_CHECKING:
    from kernelsweep.toolchain.resolve import Toolchain


@dataclass(frozen=True)
class TraceOutput:
    ir_path: Path
    tracer: str
    neff_path: Path | None = None  # set when the tracing API compiled too: no `neuronx-cc compile` needed


@dataclass(frozen=True)
class TensorStub:
    """The output description nki_standalone takes (a duck type: shape, dtype, name)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    name: str


@dataclass(frozen=True)
class TraceRequest:
    kernel: Any  # the NKI kernel object named by KernelDefinition.nki_kernel
    inputs: dict[str, np.ndarray]  # named as the kernel's parameters and the NEFF's inputs
    outputs: list[TensorStub]
    target: str
    lnc: int


IrAndNeff = tuple[Path, Path | None]
TraceRun = Callable[[SimpleNamespace, Point, KernelDefinition, Path], IrAndNeff]


@dataclass(frozen=True)
class Tracer:
    name: str
    load: Callable[[], SimpleNamespace]  # imports this generation's API; raises if absent
    run: TraceRun  # (api, point, definition, workdir) -> (IR, NEFF or None)


def _nki_request(adapter: Callable[[SimpleNamespace, TraceRequest, Path], IrAndNeff]) -> TraceRun:
    """An adapter of the real NKI APIs, fed the kernel object and its inputs built for the point."""

    def run(api: SimpleNamespace, point: Point, definition: KernelDefinition, workdir: Path) -> IrAndNeff:
        request = TraceRequest(
            kernel=_load_nki_kernel(definition.nki_kernel),
            inputs=definition.build_inputs(point.params, point.dtype, point.seed),
            outputs=[
                TensorStub(t.shape, numpy_dtype(t.dtype), t.name)
                for t in definition.output_infos(point.params, point.dtype)
            ],
            target=get_platform(point.platform).compiler_target,
            lnc=point.lnc,
        )
        return adapter(api, request, workdir)

    return run


# ---------------------------------------------------------------------------------------------
# nki.compiler.frontend: the path @nki.jit itself takes (recipe verified on NKI 0.6.0)
# ---------------------------------------------------------------------------------------------


def _load_frontend() -> SimpleNamespace:
    from nki._backends.context import nki_ir_context
    from nki.compiler.frontend import TracerFrontend
    from nki.compiler.ncc_driver import CompiledKernel, CompileOptions

    return SimpleNamespace(
        nki_ir_context=nki_ir_context,
        TracerFrontend=TracerFrontend,
        CompileOptions=CompileOptions,
        CompiledKernel=CompiledKernel,
    )


def _run_frontend(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> tuple[Path, Path | None]:
    """nki_ir_context -> TracerFrontend().compile -> CompiledKernel.from_frontend, as in the public
    NKI 0.6.0 export recipe; the CompiledKernel step runs neuronx-cc, so this also yields the NEFF."""
    artifacts = workdir / "nki_artifacts"  # neuronx-cc refuses a non-empty artifacts dir (NCC_IDRV077)
    artifacts.mkdir()
    neff = workdir / names.NEFF
    arguments = _bind(request.kernel, request.inputs)
    with api.nki_ir_context() as ctx:
        result = api.TracerFrontend().compile(
            ctx,
            request.kernel,
            inputs=arguments,
            target=request.target,
            lnc=request.lnc,
            artifacts_dir=str(artifacts),
        )
        options = api.CompileOptions(
            target=request.target, lnc=request.lnc, output_path=str(neff), artifacts_dir=str(artifacts)
        )
        api.CompiledKernel.from_frontend(result, options)
    _require(neff, "CompiledKernel.from_frontend")
    return _pack(artifacts, workdir / "nki_artifacts.tar"), neff


def _bind(kernel: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs in the kernel's parameter order, checked against its signature by name."""
    func = getattr(kernel, "func", kernel)  # @nki.jit objects keep the Python function in .func
    try:
        return dict(inspect.signature(func).bind(**inputs).arguments)
    except TypeError as exc:
        raise TraceError(
            f"NKI kernel {getattr(func, '__name__', func)}{inspect.signature(func)} does not take the "
            f"definition's inputs {sorted(inputs)}: {exc}",
            error_class="KernelSignature",
        ) from None


# ---------------------------------------------------------------------------------------------
# neuronxcc.nki_standalone: trace only, as nki-library's test harness does (trace_kernel_only)
# ---------------------------------------------------------------------------------------------


def _load_standalone() -> SimpleNamespace:
    from neuronxcc.nki_standalone import NKI_IR_VERSION, _compile_nki_ir_to_tensorizer_ir, _write_tensorizer_ir

    return SimpleNamespace(
        NKI_IR_VERSION=NKI_IR_VERSION, to_tensorizer_ir=_compile_nki_ir_to_tensorizer_ir, write=_write_tensorizer_ir
    )


def _run_standalone(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> tuple[Path, Path | None]:
    """Positional arguments exactly as aws-neuron/nki-library's `trace_kernel_only` passes them.

    That `_write_tensorizer_ir` writes `penguin.py` is inferred (the legacy NumpyKernel's
    write_tensorizer_ir does); if it writes anything else, the TraceError lists what it wrote.
    """
    ir_dir = workdir / "tensorizer_ir"
    ir_dir.mkdir()
    ir_module, _ = api.to_tensorizer_ir(
        request.kernel,
        request.target,
        request.lnc,
        dict(request.inputs),
        list(request.outputs),
        api.NKI_IR_VERSION.beta2,
    )
    api.write(ir_module, str(ir_dir))
    return _require(ir_dir / names.IR, "_write_tensorizer_ir"), None


# ---------------------------------------------------------------------------------------------
# Legacy KLIR + penguin (SDK <= 2.26), exactly the steps of seed 000
# ---------------------------------------------------------------------------------------------

LEGACY_TRACE_KERNEL_MODULES = (
    "nki.compiler.backends.neuron.TraceKernel",  # as seed 000 imports it
    "neuronxcc.nki.compiler.backends.neuron.TraceKernel",  # where seed 004's traceback shows it
)


def _load_legacy() -> SimpleNamespace:
    from neuronxcc.starfish.penguin.ir.IRBuilder import IRBuilder
    from neuronxcc.starfish.penguin.ir.IRWriter import IRWriter

    return SimpleNamespace(
        TraceKernel=_first_attribute(LEGACY_TRACE_KERNEL_MODULES, "TraceKernel"), IRBuilder=IRBuilder, IRWriter=IRWriter
    )


def _first_attribute(modules: tuple[str, ...], attribute: str) -> Any:
    errors = []
    for name in modules:
        try:
            return getattr(importlib.import_module(name), attribute)
        except (ImportError, AttributeError) as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("; ".join(errors))


def _run_legacy(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> tuple[Path, Path | None]:
    builder = api.IRBuilder()
    for name, array in request.inputs.items():
        builder.tensor(shape=array.shape, dtype=array.dtype, name=name)
    traced = api.TraceKernel.trace(func=request.kernel, platform_target=request.target)
    traced[request.lnc](**request.inputs)
    weights = workdir / "weights"
    weights.mkdir()
    penguin = workdir / names.IR
    with open(penguin, "w") as handle:
        api.IRWriter.run(cu=builder.cu, output=handle, save_weights=True, weights_dir=str(weights))
    return _require(penguin, "IRWriter.run"), None


# ---------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------

TRACERS: tuple[Tracer, ...] = (
    Tracer("nki.compiler.frontend", _load_frontend, _nki_request(_run_frontend)),
    Tracer("neuronxcc.nki_standalone", _load_standalone, _nki_request(_run_standalone)),
    Tracer("legacy-penguin", _load_legacy, _nki_request(_run_legacy)),
)


def probe_tracers(tracers: tuple[Tracer, ...] = TRACERS) -> list[tuple[Tracer, SimpleNamespace | None, str]]:
    """Each tracer with its loaded API (None when unavailable) and why it is unavailable."""
    found: list[tuple[Tracer, SimpleNamespace | None, str]] = []
    for tracer in tracers:
        try:
            found.append((tracer, tracer.load(), ""))
        except Exception as exc:  # placeholder wheels raise at import: any failure means absent
            found.append((tracer, None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
    return found


def select_tracer(tracers: tuple[Tracer, ...] = TRACERS) -> tuple[Tracer, SimpleNamespace]:
    probed = probe_tracers(tracers)
    for tracer, api, _ in probed:
        if api is not None:
            return tracer, api
    tried = "; ".join(f"{tracer.name} ({reason})" for tracer, _, reason in probed)
    installed = ", ".join(package_version(name).describe() for name in SDK_PACKAGES)
    raise TraceError(
        f"no NKI tracing API is importable (tried {tried}); installed: {installed}. Install the Neuron SDK "
        "from https://pip.repos.neuron.amazonaws.com (kernelsweep doctor shows details) or use --toolchain sim",
        error_class="TracerUnavailable",
    )


def trace(toolchain: Toolchain, point: Point, definition: KernelDefinition, workdir: Path) -> TraceOutput:
    """Trace with the first of the toolchain's tracers whose API is importable on this host."""
    tracer, api = select_tracer(toolchain.tracers)
    try:
        ir_path, neff_path = tracer.run(api, point, definition, workdir)
    except KernelsweepError:
        raise
    except Exception as exc:  # the tracer's own errors, classified once, here
        raise trace_failure(exc, tracer.name) from exc
    return TraceOutput(ir_path=ir_path, tracer=tracer.name, neff_path=neff_path)


def _load_nki_kernel(ref: str) -> Any:
    module_name, _, attribute = ref.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise TraceError(
            f"cannot import the NKI kernel {ref!r} ({type(exc).__name__}: {exc}); check the definition's nki_kernel",
            error_class="KernelImport",
        ) from None


def _require(path: Path, producer: str) -> Path:
    if not path.is_file():
        written = sorted(p.name for p in path.parent.iterdir()) if path.parent.is_dir() else []
        raise TraceError(
            f"{producer} wrote no {path.name} in {path.parent} (found: {', '.join(written) or 'nothing'})",
            error_class="MissingOutput",
        )
    return path


def _pack(folder: Path, archive: Path) -> Path:
    """One reproducible file for the artifact store: sorted names, no times or owners."""

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with tarfile.open(archive, "w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False, filter=normalise)
    return archive
