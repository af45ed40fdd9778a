"""The real NKI tracing APIs, one `Tracer` per generation, newest first (reference Corrections 1, 2):

  nki.compiler.driver       compile_to_bir(kernel_func=, frontend=ParserFrontend(), inputs=, compile_opts=,
                            output_names=) + ncc_driver.compile_bir_to_neff(opts, result, [], in, out)
                            (aws-neuron/nki-library test harness after 2026-04; awslabs/nki-autotune)
  nki.compiler.frontend     ParserFrontend().compile(kernel, inputs=, target=, lnc=, artifacts_dir=,
                            output_names=) + CompiledKernel.from_frontend(result, opts) (nki-library
                            2026-04-13); variant "context": compile(ctx, kernel, ...) inside
                            nki_ir_context() (a third-party NKI 0.6.0 recipe)
  neuronxcc.nki_standalone  compile_nki_ir_kernel_to_neff(kernel, inputs, outputs, target, lnc, out_dir,
                            NKI_IR_VERSION.beta2, args) -> <out_dir>/file.neff (nki-library 2026-02-27)
  legacy-penguin            SDK <= 2.26: KLIR TraceKernel + penguin IRBuilder/IRWriter -> penguin.py and
                            its weights folder, for `neuronx-cc compile` (seed 000; best effort, no
                            public code confirms these private APIs)

Each `load` imports one generation and probes its signatures; a variant the adapter knows is
reported (`api.variant`), one it does not know makes the generation unavailable rather than
failing every point later. Everything here runs inside the trace worker.
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kernelsweep import names
from kernelsweep.errors import TraceError
from kernelsweep.toolchain.tracing import TraceProducts, Tracer, TraceRequest

LEGACY_TRACE_KERNEL_MODULES = (
    "nki.compiler.backends.neuron.TraceKernel",  # as seed 000 imports it
    "neuronxcc.nki.compiler.backends.neuron.TraceKernel",  # where seed 004's traceback shows it
)
CONTEXT_MODULES = ("nki._backends.context", "nki.compiler.driver")  # where nki_ir_context has lived


@dataclass(frozen=True)
class TensorStub:
    """The output description nki_standalone takes (a duck type: shape, dtype, name)."""

    shape: tuple[int, ...]
    dtype: Any
    name: str


def _parameters(function: Callable[..., Any], what: str, required: Iterable[str]) -> list[str]:
    found = [p for p in inspect.signature(function).parameters if p != "self"]
    missing = [p for p in required if p not in found]
    if missing:
        raise TypeError(f"{what}{inspect.signature(function)} takes no {', '.join(missing)}: an unknown API variant")
    return found


def _positional(function: Callable[..., Any], what: str, count: int) -> int:
    params = inspect.signature(function).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return count
    usable = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(usable) < count:
        raise TypeError(f"{what}{inspect.signature(function)} takes fewer than {count} positional arguments")
    return len(usable)


def nki_package_version() -> str | None:
    from kernelsweep.toolchain.versions import nki_version

    return nki_version()


# --- nki.compiler.driver ------------------------------------------------------------------------


def _load_driver() -> SimpleNamespace:
    from nki.compiler.driver import compile_to_bir
    from nki.compiler.frontend import ParserFrontend
    from nki.compiler.ncc_driver import CompileOptions, compile_bir_to_neff

    params = _parameters(compile_to_bir, "compile_to_bir", ("kernel_func", "frontend", "inputs", "compile_opts"))
    _positional(compile_bir_to_neff, "compile_bir_to_neff", 5)
    return SimpleNamespace(
        compile_to_bir=compile_to_bir,
        compile_bir_to_neff=compile_bir_to_neff,
        ParserFrontend=ParserFrontend,
        CompileOptions=CompileOptions,
        variant="" if "output_names" in params else "no-output-names",
        nki_version=nki_package_version(),
        signatures=_signatures(compile_to_bir=compile_to_bir, compile_bir_to_neff=compile_bir_to_neff),
    )


def _run_driver(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    kernel, inputs = _kernel_and_inputs(request)
    ir = _fresh(workdir / "ir")
    options = _options(api, request, workdir, ir / "artifacts")
    call = dict(kernel_func=kernel, frontend=api.ParserFrontend(), inputs=inputs, compile_opts=options)
    if not api.variant:
        call["output_names"] = _output_names(request)
    result = api.compile_to_bir(**call)
    started = time.perf_counter()
    in_names, out_names = _io_names(result, inputs, request)
    compiled = api.compile_bir_to_neff(options, result, [], in_names, out_names)
    seconds = time.perf_counter() - started
    return TraceProducts(ir, _neff(compiled, workdir, "compile_bir_to_neff"), seconds)


# --- nki.compiler.frontend ----------------------------------------------------------------------


def _load_frontend() -> SimpleNamespace:
    from nki.compiler.frontend import ParserFrontend
    from nki.compiler.ncc_driver import CompiledKernel, CompileOptions

    params = _parameters(ParserFrontend.compile, "ParserFrontend.compile", ("inputs", "target", "lnc", "artifacts_dir"))
    api = SimpleNamespace(ParserFrontend=ParserFrontend, CompiledKernel=CompiledKernel, CompileOptions=CompileOptions)
    variants = []
    if params[0] == "ctx":
        api.nki_ir_context = _first_attribute(CONTEXT_MODULES, "nki_ir_context")
        variants.append("context")
    api.output_names = "output_names" in params
    if not api.output_names:
        variants.append("no-output-names")
    api.variant, api.nki_version = "+".join(variants), nki_package_version()
    api.signatures = _signatures(**{"ParserFrontend.compile": ParserFrontend.compile})
    return api


def _run_frontend(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    kernel, inputs = _kernel_and_inputs(request)
    ir = _fresh(workdir / "ir")
    call: dict[str, Any] = dict(
        inputs=inputs, target=request.target, lnc=request.lnc, artifacts_dir=str(_fresh(ir / "frontend"))
    )
    if api.output_names:
        call["output_names"] = _output_names(request)
    options = _options(api, request, workdir, ir / "artifacts")
    if hasattr(api, "nki_ir_context"):
        with api.nki_ir_context() as ctx:
            result = api.ParserFrontend().compile(ctx, kernel, **call)
            started = time.perf_counter()
            compiled = api.CompiledKernel.from_frontend(result, options)
    else:
        result = api.ParserFrontend().compile(kernel, **call)
        started = time.perf_counter()
        compiled = api.CompiledKernel.from_frontend(result, options)
    return TraceProducts(ir, _neff(compiled, workdir, "CompiledKernel.from_frontend"), time.perf_counter() - started)


# --- neuronxcc.nki_standalone ---------------------------------------------------------------------


def _load_standalone() -> SimpleNamespace:
    from neuronxcc.nki_standalone import NKI_IR_VERSION, compile_nki_ir_kernel_to_neff

    takes = _positional(compile_nki_ir_kernel_to_neff, "compile_nki_ir_kernel_to_neff", 7)
    return SimpleNamespace(
        compile=compile_nki_ir_kernel_to_neff,
        NKI_IR_VERSION=NKI_IR_VERSION,
        extra_args=takes >= 8,
        variant="",
        nki_version=nki_package_version(),
        signatures=_signatures(compile_nki_ir_kernel_to_neff=compile_nki_ir_kernel_to_neff),
    )


def _run_standalone(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    """Positional arguments exactly as aws-neuron/nki-library's `compile_kernel_to_neff` passes them."""
    from kernelsweep.dtypes import numpy_dtype  # the stubs' dtypes are numpy's, as the inputs'

    kernel, inputs = _kernel_and_inputs(request)
    out_dir = _fresh(workdir / "ir")
    stubs = [TensorStub(o.shape, numpy_dtype(o.dtype), o.name) for o in request.outputs]
    args: list[Any] = [kernel, inputs, stubs, request.target, request.lnc, str(out_dir), api.NKI_IR_VERSION.beta2]
    if api.extra_args:
        args.append("")
    started = time.perf_counter()
    api.compile(*args)
    seconds = time.perf_counter() - started
    neff = _require(out_dir / names.NEFF, "compile_nki_ir_kernel_to_neff")
    moved = neff.rename(workdir / names.NEFF)  # keep the NEFF out of the IR archive
    return TraceProducts(out_dir, moved, seconds)


# --- legacy KLIR + penguin (SDK <= 2.26), best effort -----------------------------------------


def _load_legacy() -> SimpleNamespace:
    from neuronxcc.starfish.penguin.ir.IRBuilder import IRBuilder
    from neuronxcc.starfish.penguin.ir.IRWriter import IRWriter

    trace_kernel = _first_attribute(LEGACY_TRACE_KERNEL_MODULES, "TraceKernel")
    return SimpleNamespace(
        TraceKernel=trace_kernel, IRBuilder=IRBuilder, IRWriter=IRWriter, variant="", nki_version=None
    )


def _run_legacy(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    """Seed 000's steps; the IR folder keeps penguin.py AND its weights folder for the compiler."""
    kernel, inputs = _kernel_and_inputs(request)
    ir = _fresh(workdir / "ir")
    weights = _fresh(ir / "weights")
    builder = api.IRBuilder()
    for name, array in inputs.items():
        builder.tensor(shape=array.shape, dtype=array.dtype, name=name)
    traced = api.TraceKernel.trace(func=kernel, platform_target=request.target)
    traced[request.lnc](**inputs)
    with open(ir / names.PENGUIN, "w") as handle:
        api.IRWriter.run(cu=builder.cu, output=handle, save_weights=True, weights_dir=str(weights))
    _require(ir / names.PENGUIN, "IRWriter.run")
    return TraceProducts(ir, None)


# --- what _write_tensorizer_ir writes: a question for `doctor --smoke`, never a sweep's tracer -----------


def _load_tensorizer_ir() -> SimpleNamespace:
    from neuronxcc.nki_standalone import NKI_IR_VERSION, _compile_nki_ir_to_tensorizer_ir, _write_tensorizer_ir

    return SimpleNamespace(
        to_ir=_compile_nki_ir_to_tensorizer_ir,
        write=_write_tensorizer_ir,
        NKI_IR_VERSION=NKI_IR_VERSION,
        variant="",
        nki_version=nki_package_version(),
        signatures=_signatures(_write_tensorizer_ir=_write_tensorizer_ir),
    )


def _run_tensorizer_ir(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    """nki-library's `trace_kernel_only` positional call; the folder is whatever it writes."""
    from kernelsweep.dtypes import numpy_dtype

    kernel, inputs = _kernel_and_inputs(request)
    out = _fresh(workdir / "ir")
    stubs = [TensorStub(o.shape, numpy_dtype(o.dtype), o.name) for o in request.outputs]
    ir_module, _ = api.to_ir(kernel, request.target, request.lnc, inputs, stubs, api.NKI_IR_VERSION.beta2)
    api.write(ir_module, str(out))
    return TraceProducts(out, None)


TENSORIZER_IR = Tracer(
    "neuronxcc.nki_standalone/tensorizer-ir", f"{__name__}:TENSORIZER_IR", _load_tensorizer_ir, _run_tensorizer_ir, True
)

TRACERS: tuple[Tracer, ...] = (
    Tracer("nki.compiler.driver", f"{__name__}:DRIVER", _load_driver, _run_driver),
    Tracer("nki.compiler.frontend", f"{__name__}:FRONTEND", _load_frontend, _run_frontend),
    Tracer("neuronxcc.nki_standalone", f"{__name__}:STANDALONE", _load_standalone, _run_standalone),
    Tracer("legacy-penguin", f"{__name__}:LEGACY", _load_legacy, _run_legacy, best_effort=True),
)
DRIVER, FRONTEND, STANDALONE, LEGACY = TRACERS


# --- shared steps ---------------------------------------------------------------------------------


def _kernel_and_inputs(request: TraceRequest) -> tuple[Any, dict[str, Any]]:
    """The NKI kernel object and its inputs, built exactly as the inputs stage builds them."""
    from kernelsweep.kernels import load_kernel

    kernel = load_nki_kernel(request.nki_kernel)
    arrays = load_kernel(request.kernel_ref).build_inputs(request.params, request.dtype, request.seed)
    return kernel, bind(kernel, arrays)


def load_nki_kernel(ref: str) -> Any:
    module_name, _, attribute = ref.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise TraceError(
            f"cannot import the NKI kernel {ref!r} ({type(exc).__name__}: {exc}); check the definition's nki_kernel",
            error_class="KernelImport",
        ) from None


def bind(kernel: Any, inputs: dict[str, Any]) -> dict[str, Any]:
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


def _output_names(request: TraceRequest) -> list[str]:
    return list(request.output_names or [o.name for o in request.outputs])


def _options(api: SimpleNamespace, request: TraceRequest, workdir: Path, artifacts: Path) -> Any:
    # neuronx-cc refuses a non-empty artifacts folder (NCC_IDRV077): a fresh, empty one
    return api.CompileOptions(
        target=request.target,
        lnc=request.lnc,
        output_path=str(workdir / names.NEFF),
        artifacts_dir=str(_fresh(artifacts)),
    )


def _io_names(result: Any, inputs: dict[str, Any], request: TraceRequest) -> tuple[list[str], list[str]]:
    """The names the compiled kernel's descriptor reports (nki-library reads them there), else ours."""
    descriptor = getattr(result, "descriptor", None)
    if descriptor is not None and hasattr(descriptor, "input_specs"):
        return [s.name for s in descriptor.input_specs], [s.name for s in descriptor.output_specs]
    return list(inputs), _output_names(request)


def _neff(compiled: Any, workdir: Path, producer: str) -> Path:
    """The NEFF where the API says it put it (`neff_path`), not where we asked for it."""
    return _require(Path(getattr(compiled, "neff_path", None) or workdir / names.NEFF), producer)


def _signatures(**functions: Callable[..., Any]) -> str:
    return "; ".join(f"{name}{inspect.signature(f)}" for name, f in functions.items())


def _fresh(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=False)
    return folder


def _first_attribute(modules: tuple[str, ...], attribute: str) -> Any:
    errors = []
    for name in modules:
        try:
            return getattr(importlib.import_module(name), attribute)
        except (ImportError, AttributeError) as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("; ".join(errors))


def _require(path: Path, producer: str) -> Path:
    if not path.is_file():
        written = sorted(p.name for p in path.parent.iterdir()) if path.parent.is_dir() else []
        raise TraceError(
            f"{producer} wrote no {path.name} in {path.parent} (found: {', '.join(written) or 'nothing'})",
            error_class="MissingOutput",
        )
    return path
