"""Tracing a kernel to the IR the compiler takes: the step before `neuronx-cc compile`.

The simulated toolchain's tracer writes a data-only `penguin.py`. Real tracing goes through NKI
APIs that moved between SDK generations; the one that imports is used.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.dtypes import itemsize
from kernelsweep.errors import TraceError
from kernelsweep.kernels import KernelDefinition
from kernelsweep.sim import COMPILER_VERSION
from kernelsweep.sim.ir import IR_NAME, write_ir
from kernelsweep.spec import Point
from kernelsweep.toolchain.resolve import Toolchain

REAL_TRACER_MODULES = ("nki.compiler.frontend", "neuronxcc.nki_standalone", "neuronxcc.starfish.penguin")


@dataclass(frozen=True)
class TraceOutput:
    ir_path: Path
    tracer: str


def sim_trace(point: Point, definition: KernelDefinition, workdir: Path) -> TraceOutput:
    cost = definition.cost(point.params, point.dtype)

    def tensors(infos):
        return [
            {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": _nbytes(t.shape, t.dtype)}
            for t in infos
        ]

    payload = {
        "kernel": definition.name,
        "kernel_ref": point.kernel_ref,
        "params": point.params,
        "dtype": point.dtype,
        "platform": point.platform,
        "lnc": point.lnc,
        "flops": cost.flops,
        "hbm_bytes": cost.hbm_bytes,
        "dma_transfers": cost.dma_transfers,
        "engine": cost.engine,
        "tracer_version": COMPILER_VERSION,
        "inputs": tensors(definition.input_infos(point.params, point.dtype)),
        "outputs": tensors(definition.output_infos(point.params, point.dtype)),
    }
    ir_path = workdir / IR_NAME
    write_ir(ir_path, payload)
    return TraceOutput(ir_path=ir_path, tracer="sim-penguin")


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return math.prod(shape) * itemsize(dtype)


def trace(toolchain: Toolchain, point: Point, definition: KernelDefinition, workdir: Path) -> TraceOutput:
    if toolchain.is_simulation:
        return sim_trace(point, definition, workdir)
    available = [m for m in REAL_TRACER_MODULES if _importable(m)]
    raise TraceError(
        f"no supported NKI tracing API found (tried {', '.join(REAL_TRACER_MODULES)}; "
        f"importable: {', '.join(available) or 'none'}); install the Neuron SDK's neuronx-cc >= 2.21"
    )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
