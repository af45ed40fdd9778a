"""The simulated toolchain's tracers: the NKI generation named by KERNELSWEEP_SIM_NKI, run in the
production trace worker like any real tracer.

Both read the kernel's real source and run it on the simulated NKI language (sim.nki.trace), so a
construct or a tile the emulated generation refuses fails here, at trace time, in NKI's words where
they are known (seed 004's partition error). What they write is marked simulated:

  sim-nki-frontend  NKI 0.1-0.7: traces AND compiles in one call, as nki.compiler.driver does; the
                    NEFF's outputs are named as the caller's `output_names`, else output_0, ...;
                    a compiler diagnostic goes to fd 2 and the call raises "Pass pipeline failed",
                    as the real driver does (awslabs/nki-autotune 97935bf); on 0.7 the kernel's
                    LNC is NEURON_LOGICAL_NC_CONFIG's (default 1), checked against the compile's
  sim-penguin       legacy (neuronxcc.nki, SDK <= 2.26): penguin.py plus a weights folder, for the
                    stand-in `neuronx-cc compile`

The IR payload is a data literal (sim.ir) holding what the simulated compiler and profiler model:
the definition's cost, and what the trace measured (DMA count, how evenly the programs shared the
work at LNC=2).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from kernelsweep import names
from kernelsweep.dtypes import itemsize
from kernelsweep.errors import TraceError
from kernelsweep.kernels import KernelSourceNotFound, load_kernel
from kernelsweep.platforms import get_platform
from kernelsweep.sim import COMPILER_VERSION, SIM_VERSION_SUFFIX
from kernelsweep.sim.compile import allocation, debug_info_requested, diagnose, emulate_compile_time, write_sim_neff
from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.ir import write_ir
from kernelsweep.sim.nki.generations import Generation, get_generation
from kernelsweep.sim.nki.tensor import NkiError
from kernelsweep.sim.nki.trace import KernelSignatureError, trace_kernel
from kernelsweep.toolchain.tracing import TensorSpec, TraceProducts, Tracer, TraceRequest
from kernelsweep.toolchain.tracing.binding import BOUND_FOLDER, bound_source

if TYPE_CHECKING:
    from kernelsweep.kernels import KernelDefinition
    from kernelsweep.sweepspec.point import Point

FRONTEND_NAME, PENGUIN_NAME = "sim-nki-frontend", "sim-penguin"
SIM_IR = "simulated_bir.py"  # the frontend's artifact: the same data literal penguin.py holds


def _load(legacy: bool) -> SimpleNamespace:
    generation = get_generation(SimConfig.from_env().nki)
    if generation.legacy != legacy:
        wanted = "neuronxcc.nki (KERNELSWEEP_SIM_NKI=legacy)" if legacy else "the nki package (0.1-0.7)"
        raise ImportError(f"the simulated host has NKI {generation.name}, not {wanted}")
    version = f"neuronxcc.nki {COMPILER_VERSION}" if legacy else f"{generation.name}.0{SIM_VERSION_SUFFIX}"
    return SimpleNamespace(generation=generation, variant="", nki_version=version)


def bound(request: TraceRequest, workdir: Path) -> tuple[Path, str]:
    """The (file, function) to trace: the kernel with the point's tunables bound in, as every tracer
    binds them (kernelsweep.toolchain.tracing.binding)."""
    return bound_source(request.nki_kernel, request.tunables, workdir / BOUND_FOLDER)


def payload(
    request: TraceRequest, generation: Generation, tracer: str, source: tuple[Path, str], kernel_lnc: int | None = None
) -> dict:
    """Trace the kernel in `source` (file, function) on the model, on its tensors alone (raising what
    the emulated tracer raises), and describe it; `kernel_lnc` is the LNC the kernel itself runs at
    when it differs from the compile's (NKI 0.7)."""
    definition = load_kernel(request.kernel_ref)
    programs = kernel_lnc or request.lnc
    try:
        traced = trace_kernel(
            request.nki_kernel, _specs(request.inputs), _specs(request.outputs), generation, programs, source=source
        )
    except KernelSourceNotFound as exc:
        raise TraceError(f"{tracer}: {exc}; check the definition's nki_kernel", error_class="KernelImport") from None
    except KernelSignatureError as exc:
        raise TraceError(f"{tracer}: {exc}", error_class="KernelSignature") from None
    except NkiError as exc:
        raise TraceError(f"{tracer}: NKI {generation.name}: {exc}", error_class="KernelConstraint") from None
    cost = definition.cost(request.params, request.dtype)
    return {
        "kernel": definition.name,
        "kernel_ref": request.kernel_ref,
        "params": request.params,
        "dtype": request.dtype,
        "platform": request.platform,
        "lnc": request.lnc,
        "kernel_lnc": programs,
        "flops": cost.flops,
        "hbm_bytes": cost.hbm_bytes,
        "dma_transfers": cost.dma_transfers,
        "engine": cost.engine,
        "parallelism": traced.parallelism,
        "traced_dma_count": traced.dma_count,
        "tunables": dict(request.tunables),
        # what the launch did, summed over its programs: the model times a `timed_from_trace` kernel from it
        "timed_from_trace": definition.timed_from_trace,
        "traced_hbm_bytes": traced.total("hbm_read_bytes") + traced.total("hbm_write_bytes"),
        "traced_macs": traced.total("macs"),
        "traced_pe_cycles": traced.total("pe_cycles"),
        "nki_generation": generation.name,
        "nki_source_sha256": traced.source_sha256,
        "unmodelled": list(traced.unmodelled),
        "warnings": list(traced.warnings),
        "tracer_version": COMPILER_VERSION,
        "inputs": _tensors(request.inputs),
        "outputs": _tensors(request.outputs),
        # the name only: the worker imports the source from a fresh temporary folder, and the NEFF (whose
        # bytes seed the seeded per-repeat noise) must be the same bytes in every clone and every build
        "source_file": traced.source.name,
        "lines": [list(entry) for entry in traced.lines],  # the compiled program by source line and engine
    }


def _specs(tensors: tuple[TensorSpec, ...]) -> list[tuple[str, tuple[int, ...], str]]:
    return [(t.name, tuple(t.shape), t.dtype) for t in tensors]


def _tensors(tensors: tuple[TensorSpec, ...]) -> list[dict]:
    return [
        {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": math.prod(t.shape) * itemsize(t.dtype)}
        for t in tensors
    ]


def kernel_lnc(generation: Generation) -> int | None:
    """NKI 0.7 reads a kernel's LNC from NEURON_LOGICAL_NC_CONFIG, 1 when unset (addendum F6)."""
    if not generation.kernel_lnc_from_env:
        return None
    text = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "1")
    return int(text) if text in ("1", "2") else 1


def compiler_failed(diagnostic: str) -> RuntimeError:
    """What the real driver does with a diagnostic: neuronx-cc writes it to fd 2, the call raises a
    generic error (awslabs/nki-autotune 97935bf: "Pass pipeline failed")."""
    os.write(2, f"ERROR [neuronx-cc]: {diagnostic}\n".encode())
    return RuntimeError("Pass pipeline failed")


def _run_frontend(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    ir = payload(request, api.generation, FRONTEND_NAME, bound(request, workdir), kernel_lnc(api.generation))
    folder = workdir / "ir"
    folder.mkdir()
    write_ir(folder / SIM_IR, ir)
    config = SimConfig.from_env()
    started = time.perf_counter()
    problem = diagnose(ir, request.target, request.lnc, config)
    if problem:
        raise compiler_failed(problem)
    allocation(ir, config)
    emulate_compile_time(ir, config)
    neff = write_sim_neff(
        workdir / names.NEFF, ir, request.target, request.lnc, request.output_names, config, debug_info_requested()
    )
    options = {"target": request.target, "lnc": request.lnc}
    return TraceProducts(folder, neff, time.perf_counter() - started, options)


def _run_penguin(api: SimpleNamespace, request: TraceRequest, workdir: Path) -> TraceProducts:
    folder = workdir / "ir"
    (folder / "weights").mkdir(parents=True)  # IRWriter's weights folder: the compiler reads it too
    write_ir(folder / names.PENGUIN, payload(request, api.generation, PENGUIN_NAME, bound(request, workdir)))
    (folder / "weights" / "README").write_text("SIMULATED: the simulated kernels have no constant weights.\n")
    return TraceProducts(folder, None)


SIM_FRONTEND = Tracer(FRONTEND_NAME, f"{__name__}:SIM_FRONTEND", lambda: _load(False), _run_frontend)
SIM_PENGUIN = Tracer(PENGUIN_NAME, f"{__name__}:SIM_PENGUIN", lambda: _load(True), _run_penguin)
SIM_TRACERS = (SIM_FRONTEND, SIM_PENGUIN)


def model_neff(point: Point, definition: KernelDefinition, workdir: Path, compiler_version: str | None) -> Path:
    """`--toolchain cpu`: the simulator's NEFF of the point, which its profiler times in place of the
    real NEFF (a real NEFF holds no model to time). Traced at the current generation, in this process,
    and built as `compiler_version` (the real compiler's, which the row reports) when it is known: the
    model then runs as the simulator runs that build's code (a culprit build, an SDK's tuning), not as
    the simulator's own default compiler would have built it."""
    request = TraceRequest.for_point(point, definition, get_platform(point.platform).compiler_target)
    config = SimConfig.from_env()
    if compiler_version:
        config = replace(config, compiler_version=compiler_version)
    ir = payload(request, get_generation(config.nki), FRONTEND_NAME, bound(request, workdir))
    return write_sim_neff(workdir / names.NEFF, ir, request.target, request.lnc, request.output_names, config, True)


def sim_trace(point: Point, definition: KernelDefinition, workdir: Path) -> Path:
    """One point's IR payload, traced in this process at the configured generation: what the
    calibration fits and its tests check, the same payload a sweep's simulated profiler models."""
    request = TraceRequest.for_point(point, definition, get_platform(point.platform).compiler_target)
    path = workdir / SIM_IR
    ir = payload(request, get_generation(SimConfig.from_env().nki), FRONTEND_NAME, bound(request, workdir))
    write_ir(path, ir)
    return path
