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

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kernelsweep import names
from kernelsweep.toolchain.tracing import TraceProducts, Tracer, TraceRequest
from kernelsweep.toolchain.tracing.calls import (
    CONTEXT_MODULES,
    LEGACY_TRACE_KERNEL_MODULES,
    TensorStub,
    compile_options,
    first_attribute,
    fresh,
    io_names,
    kernel_and_inputs,
    neff_at,
    nki_package_version,
    output_names,
    parameters,
    positional,
    require,
    signatures,
)

# --- nki.compiler.driver ------------------------------------------------------------------------


def _load_driver() -> SimpleNamespace:
    from nki.compiler.driver import compile_to_bir
    from nki.compiler.frontend import ParserFrontend
    from nki.compiler.ncc_driver import CompileOptions, compile_bir_to_neff

    params = parameters(compile_to_bir, "compile_to_bir", ("kernel_func", "frontend", "inputs", "compile_opts"))
    positional(compile_bir_to_neff, "compile_bir_to_neff", 5)
    return SimpleNamespace(
        compile_to_bir=compile_to_bir,
        compile_bir_to_neff=compile_bir_to_neff,
        ParserFrontend=ParserFrontend,
        CompileOptions=CompileOptions,
        variant="" if "output_names" in params else "no-output-names",
        nki_version=nki_package_version(),
        signatures=signatures(compile_to_bir=compile_to_bir, compile_bir_to_neff=compile_bir_to_neff),
    )


def _run_driver(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    kernel, inputs = kernel_and_inputs(request)
    ir = fresh(workdir / "ir")
    options = compile_options(api, request, workdir, ir / "artifacts")
    call = dict(kernel_func=kernel, frontend=api.ParserFrontend(), inputs=inputs, compile_opts=options)
    if not api.variant:
        call["output_names"] = output_names(request)
    result = api.compile_to_bir(**call)
    started = time.perf_counter()
    in_names, out_names = io_names(result, inputs, request)
    compiled = api.compile_bir_to_neff(options, result, [], in_names, out_names)
    seconds = time.perf_counter() - started
    return TraceProducts(ir, neff_at(compiled, workdir, "compile_bir_to_neff"), seconds)


# --- nki.compiler.frontend ----------------------------------------------------------------------


def _load_frontend() -> SimpleNamespace:
    from nki.compiler.frontend import ParserFrontend
    from nki.compiler.ncc_driver import CompiledKernel, CompileOptions

    params = parameters(ParserFrontend.compile, "ParserFrontend.compile", ("inputs", "target", "lnc", "artifacts_dir"))
    api = SimpleNamespace(ParserFrontend=ParserFrontend, CompiledKernel=CompiledKernel, CompileOptions=CompileOptions)
    variants = []
    if params[0] == "ctx":
        api.nki_ir_context = first_attribute(CONTEXT_MODULES, "nki_ir_context")
        variants.append("context")
    api.output_names = "output_names" in params
    if not api.output_names:
        variants.append("no-output-names")
    api.variant, api.nki_version = "+".join(variants), nki_package_version()
    api.signatures = signatures(**{"ParserFrontend.compile": ParserFrontend.compile})
    return api


def _run_frontend(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    kernel, inputs = kernel_and_inputs(request)
    ir = fresh(workdir / "ir")
    call: dict[str, Any] = dict(
        inputs=inputs, target=request.target, lnc=request.lnc, artifacts_dir=str(fresh(ir / "frontend"))
    )
    if api.output_names:
        call["output_names"] = output_names(request)
    options = compile_options(api, request, workdir, ir / "artifacts")
    if hasattr(api, "nki_ir_context"):
        with api.nki_ir_context() as ctx:
            result = api.ParserFrontend().compile(ctx, kernel, **call)
            started = time.perf_counter()
            compiled = api.CompiledKernel.from_frontend(result, options)
    else:
        result = api.ParserFrontend().compile(kernel, **call)
        started = time.perf_counter()
        compiled = api.CompiledKernel.from_frontend(result, options)
    return TraceProducts(ir, neff_at(compiled, workdir, "CompiledKernel.from_frontend"), time.perf_counter() - started)


# --- neuronxcc.nki_standalone ---------------------------------------------------------------------


def _load_standalone() -> SimpleNamespace:
    from neuronxcc.nki_standalone import NKI_IR_VERSION, compile_nki_ir_kernel_to_neff

    takes = positional(compile_nki_ir_kernel_to_neff, "compile_nki_ir_kernel_to_neff", 7)
    return SimpleNamespace(
        compile=compile_nki_ir_kernel_to_neff,
        NKI_IR_VERSION=NKI_IR_VERSION,
        extra_args=takes >= 8,
        variant="",
        nki_version=nki_package_version(),
        signatures=signatures(compile_nki_ir_kernel_to_neff=compile_nki_ir_kernel_to_neff),
    )


def _run_standalone(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    """Positional arguments exactly as aws-neuron/nki-library's `compile_kernel_to_neff` passes them."""
    from kernelsweep.dtypes import numpy_dtype  # the stubs' dtypes are numpy's, as the inputs'

    kernel, inputs = kernel_and_inputs(request)
    out_dir = fresh(workdir / "ir")
    stubs = [TensorStub(o.shape, numpy_dtype(o.dtype), o.name) for o in request.outputs]
    args: list[Any] = [kernel, inputs, stubs, request.target, request.lnc, str(out_dir), api.NKI_IR_VERSION.beta2]
    if api.extra_args:
        args.append("")
    started = time.perf_counter()
    api.compile(*args)
    seconds = time.perf_counter() - started
    neff = require(out_dir / names.NEFF, "compile_nki_ir_kernel_to_neff")
    moved = neff.rename(workdir / names.NEFF)  # keep the NEFF out of the IR archive
    return TraceProducts(out_dir, moved, seconds)


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
    kernel, inputs = kernel_and_inputs(request)
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

    kernel, inputs = kernel_and_inputs(request)
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
)
DRIVER, FRONTEND, STANDALONE, LEGACY = TRACERS
