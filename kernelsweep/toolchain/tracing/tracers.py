"""The real NKI tracing APIs, one `Tracer` per generation, newest first (reference Corrections 1, 2):

  nki.compiler.driver       compile_to_bir(kernel, frontend=, inputs=, compile_opts=, output_names=), then
                            compile_bir_to_neff(opts, bir, arrays, in_names, out_names). compile_to_bir
                            returns the pair (bir, cr) (awslabs/nki-autotune runner/compile.py,
                            3c2e2b1..d57bcc3, 2026-04..06: zero arrays, names from cr) or one result
                            with `.descriptor` (the nki-library fork: [] and the descriptor's names);
                            CompileOptions and compile_bir_to_neff come from nki.compiler.driver, else
                            nki.compiler.ncc_driver
  nki.compiler.frontend     Frontend().compile(kernel, inputs=, target=, lnc=, artifacts_dir=,
                            output_names=) + CompiledKernel.from_frontend(result, opts) (nki-library
                            2026-04-13); variant "context": compile(ctx, kernel, ...) inside
                            nki_ir_context() (a third-party NKI 0.6.0 recipe)
  neuronxcc.nki_standalone  compile_nki_ir_kernel_to_neff(kernel, inputs, outputs, target, lnc, out_dir,
                            NKI_IR_VERSION.beta2, args, enable_device_dump) -> <out_dir>/file.neff
                            (nki-library test/utils/kernel_tracer.py, d2ad3a5, 2026-04-13: 9 positionals;
                            0759719, 2026-02-27: 8)
  legacy-penguin            SDK <= 2.26: KLIR TraceKernel + penguin IRBuilder/IRWriter -> penguin.py and
                            its weights folder, for `neuronx-cc compile` (seed 000; best effort, no
                            public code confirms these private APIs)
  nki.jit/artifacts         the route AWS documents for NKI 0.7: NKI_ARTIFACTS_DIR, then the kernel
                            called with NumPy arrays (tracing.artifacts); it executes the kernel, so it
                            is tried last, in a worker of its own holding the point's core lease

The frontend is ParserFrontend, as nki-library's harness uses, except on NKI 0.7+, which specializes
by Python tracing: there TracerFrontend (the `tracer-frontend` variant) unless NKI_COMPILER_FRONTEND
is `custom`. A compiled kernel carrying `neuronx_cc_error` is a compile failure, not a missing NEFF.

Each `load` imports one generation and probes its signatures; a variant the adapter knows is
reported (`api.variant`), one it does not know makes the generation unavailable rather than
failing every point later. Everything here runs inside the trace worker.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kernelsweep import names
from kernelsweep.toolchain.tracing.artifacts import ARTIFACTS
from kernelsweep.toolchain.tracing.calls import (
    CONTEXT_MODULES,
    LEGACY_TRACE_KERNEL_MODULES,
    TensorStub,
    check_compiled,
    compile_api,
    compile_options,
    described_names,
    first_attribute,
    fresh,
    frontend_class,
    kernel_and_inputs,
    neff_at,
    nki_package_version,
    output_names,
    parameters,
    positional,
    require,
    signatures,
    split_result,
    zero_inputs,
)
from kernelsweep.toolchain.tracing.request import TraceProducts, Tracer, TraceRequest

# --- nki.compiler.driver ------------------------------------------------------------------------


def _load_driver() -> SimpleNamespace:
    from nki.compiler import frontend as frontends
    from nki.compiler.driver import compile_to_bir

    options_class, compile_bir_to_neff = compile_api("CompileOptions", "compile_bir_to_neff")
    params = parameters(compile_to_bir, "compile_to_bir", ("frontend", "inputs", "compile_opts"))
    positional(compile_bir_to_neff, "compile_bir_to_neff", 5)
    frontend, frontend_variant = frontend_class(frontends)
    takes_names = "output_names" in params
    return SimpleNamespace(
        compile_to_bir=compile_to_bir,
        compile_bir_to_neff=compile_bir_to_neff,
        takes_aliases="input_output_aliases" in inspect.signature(compile_bir_to_neff).parameters,
        Frontend=frontend,
        CompileOptions=options_class,
        output_names=takes_names,
        variant="+".join(v for v in (frontend_variant, "" if takes_names else "no-output-names") if v),
        nki_version=nki_package_version(),
        signatures=signatures(compile_to_bir=compile_to_bir, compile_bir_to_neff=compile_bir_to_neff),
    )


def _run_driver(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    kernel, inputs = kernel_and_inputs(request, workdir)
    ir = fresh(workdir / "ir")
    options = compile_options(api, request, workdir, ir / "artifacts")
    call = dict(frontend=api.Frontend(), inputs=inputs, compile_opts=options)
    if api.output_names:
        call["output_names"] = output_names(request)
    result = api.compile_to_bir(kernel, **call)
    bir, described = split_result(result)
    in_names, out_names = described_names(described, inputs, request)
    arrays = zero_inputs(described) if isinstance(result, tuple) else []  # as each source passes them
    extra = {}
    if api.takes_aliases and hasattr(described, "input_output_aliases"):
        extra["input_output_aliases"] = described.input_output_aliases
    started = time.perf_counter()
    compiled = check_compiled(api.compile_bir_to_neff(options, bir, arrays, in_names, out_names, **extra))
    seconds = time.perf_counter() - started
    return TraceProducts(ir, neff_at(compiled, workdir, "compile_bir_to_neff"), seconds, _described(api, request))


def _described(api: SimpleNamespace, request: TraceRequest, **more: Any) -> dict[str, Any]:
    """What the adapter asked for, without paths: the options that move the numbers."""
    return {"target": request.target, "lnc": request.lnc, "frontend": api.Frontend.__name__, **more}


# --- nki.compiler.frontend ----------------------------------------------------------------------


def _load_frontend() -> SimpleNamespace:
    from nki.compiler import frontend as frontends
    from nki.compiler.ncc_driver import CompiledKernel, CompileOptions

    frontend, frontend_variant = frontend_class(frontends)
    params = parameters(frontend.compile, f"{frontend.__name__}.compile", ("inputs", "target", "lnc", "artifacts_dir"))
    api = SimpleNamespace(Frontend=frontend, CompiledKernel=CompiledKernel, CompileOptions=CompileOptions)
    variants = [frontend_variant] if frontend_variant else []
    if params[0] == "ctx":
        api.nki_ir_context = first_attribute(CONTEXT_MODULES, "nki_ir_context")
        variants.append("context")
    api.output_names = "output_names" in params
    if not api.output_names:
        variants.append("no-output-names")
    api.variant, api.nki_version = "+".join(variants), nki_package_version()
    api.signatures = signatures(**{f"{frontend.__name__}.compile": frontend.compile})
    return api


def _run_frontend(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    kernel, inputs = kernel_and_inputs(request, workdir)
    ir = fresh(workdir / "ir")
    call: dict[str, Any] = dict(
        inputs=inputs, target=request.target, lnc=request.lnc, artifacts_dir=str(fresh(ir / "frontend"))
    )
    if api.output_names:
        call["output_names"] = output_names(request)
    options = compile_options(api, request, workdir, ir / "artifacts")
    if hasattr(api, "nki_ir_context"):
        with api.nki_ir_context() as ctx:
            result = api.Frontend().compile(ctx, kernel, **call)
            started = time.perf_counter()
            compiled = check_compiled(api.CompiledKernel.from_frontend(result, options))
    else:
        result = api.Frontend().compile(kernel, **call)
        started = time.perf_counter()
        compiled = check_compiled(api.CompiledKernel.from_frontend(result, options))
    seconds = time.perf_counter() - started
    neff = neff_at(compiled, workdir, "CompiledKernel.from_frontend")
    return TraceProducts(ir, neff, seconds, _described(api, request))


# --- neuronxcc.nki_standalone ---------------------------------------------------------------------


def _load_standalone() -> SimpleNamespace:
    from neuronxcc.nki_standalone import NKI_IR_VERSION, compile_nki_ir_kernel_to_neff

    takes = positional(compile_nki_ir_kernel_to_neff, "compile_nki_ir_kernel_to_neff", 7)
    return SimpleNamespace(
        compile=compile_nki_ir_kernel_to_neff,
        NKI_IR_VERSION=NKI_IR_VERSION,
        takes=min(takes, 9),
        variant="",
        nki_version=nki_package_version(),
        signatures=signatures(compile_nki_ir_kernel_to_neff=compile_nki_ir_kernel_to_neff),
    )


def _run_standalone(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    """Positional arguments exactly as aws-neuron/nki-library's `compile_kernel_to_neff` passes them."""
    from kernelsweep.dtypes import numpy_dtype  # the stubs' dtypes are numpy's, as the inputs'

    kernel, inputs = kernel_and_inputs(request, workdir)
    out_dir = fresh(workdir / "ir")
    stubs = [TensorStub(o.shape, numpy_dtype(o.dtype), o.name) for o in request.outputs]
    args: list[Any] = [kernel, inputs, stubs, request.target, request.lnc, str(out_dir), api.NKI_IR_VERSION.beta2]
    args += ["", False][: api.takes - len(args)]  # additional_compiler_args, enable_device_dump
    started = time.perf_counter()
    api.compile(*args)
    seconds = time.perf_counter() - started
    neff = require(out_dir / names.NEFF, "compile_nki_ir_kernel_to_neff")
    moved = neff.rename(workdir / names.NEFF)  # keep the NEFF out of the IR archive
    options = {"target": request.target, "lnc": request.lnc, "version": "beta2", "additional_compiler_args": ""}
    return TraceProducts(out_dir, moved, seconds, options)


# --- legacy KLIR + penguin (SDK <= 2.26), best effort -----------------------------------------


def _load_legacy() -> SimpleNamespace:
    from neuronxcc.starfish.penguin.ir.IRBuilder import IRBuilder
    from neuronxcc.starfish.penguin.ir.IRWriter import IRWriter

    trace_kernel = first_attribute(LEGACY_TRACE_KERNEL_MODULES, "TraceKernel")
    return SimpleNamespace(
        TraceKernel=trace_kernel, IRBuilder=IRBuilder, IRWriter=IRWriter, variant="", nki_version=None
    )


def _run_legacy(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    """Seed 000's steps; the IR folder keeps penguin.py AND its weights folder for the compiler."""
    kernel, inputs = kernel_and_inputs(request, workdir)
    ir = fresh(workdir / "ir")
    weights = fresh(ir / "weights")
    builder = api.IRBuilder()
    for name, array in inputs.items():
        builder.tensor(shape=array.shape, dtype=array.dtype, name=name)
    traced = api.TraceKernel.trace(func=kernel, platform_target=request.target)
    traced[request.lnc](**inputs)
    with open(ir / names.PENGUIN, "w") as handle:
        api.IRWriter.run(cu=builder.cu, output=handle, save_weights=True, weights_dir=str(weights))
    require(ir / names.PENGUIN, "IRWriter.run")
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
        signatures=signatures(_write_tensorizer_ir=_write_tensorizer_ir),
    )


def _run_tensorizer_ir(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    """nki-library's `trace_kernel_only` positional call; the folder is whatever it writes."""
    from kernelsweep.dtypes import numpy_dtype

    kernel, inputs = kernel_and_inputs(request, workdir)
    out = fresh(workdir / "ir")
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
    ARTIFACTS,  # the last resort: it executes the kernel, so it needs a core lease and a worker of its own
)
DRIVER, FRONTEND, STANDALONE, LEGACY, _ = TRACERS
