"""The simulated toolchain's tracer: a data-only `penguin.py` for the simulated `neuronx-cc`.

It checks the kernel's declared limits at trace time, in the NKI tracer's own words, because that
is where a real host reports them (seed 004); the compiler never sees such a point.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

from kernelsweep import names
from kernelsweep.dtypes import itemsize
from kernelsweep.errors import InvalidShapeError
from kernelsweep.kernels import KernelDefinition, TensorInfo
from kernelsweep.platforms import get_platform
from kernelsweep.sim import COMPILER_VERSION
from kernelsweep.sim.ir import write_ir
from kernelsweep.spec import Point
from kernelsweep.toolchain.tracing import Tracer

NAME = "sim-penguin"
NKI_PARTITION_ERROR = (  # the NKI tracer's own wording (seed 004)
    "number of partitions {parts} exceed architecture limitation of {limit}. Info on how to fix: "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/nki/api/nki.errors.html"
    "#err-num-partition-exceed-arch-limit"
)


def sim_trace(point: Point, definition: KernelDefinition, workdir: Path) -> Path:
    """Write the IR the simulated compiler reads; a kernel limit raises the NKI tracer's ValueError."""
    _check_like_nki(point, definition)
    cost = definition.cost(point.params, point.dtype)
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
        "inputs": _tensors(definition.input_infos(point.params, point.dtype)),
        "outputs": _tensors(definition.output_infos(point.params, point.dtype)),
    }
    ir_path = workdir / names.IR
    write_ir(ir_path, payload)
    return ir_path


def _tensors(infos: list[TensorInfo]) -> list[dict]:
    return [
        {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": math.prod(t.shape) * itemsize(t.dtype)}
        for t in infos
    ]


def _check_like_nki(point: Point, definition: KernelDefinition) -> None:
    """A tile partition dimension over the architecture limit (the builtin kernels call it
    `partition_size`) gets NKI's exact message; other violations keep the kernel's words."""
    try:
        definition.check(point.params, point.dtype)
    except InvalidShapeError as exc:
        limit = get_platform(point.platform).partition_limit
        parts = point.params.get("partition_size", 0)
        raise ValueError(NKI_PARTITION_ERROR.format(parts=parts, limit=limit) if parts > limit else str(exc)) from None


def _run(api: SimpleNamespace, point: Point, definition: KernelDefinition, workdir: Path) -> tuple[Path, None]:
    return sim_trace(point, definition, workdir), None


SIM_TRACER = Tracer(NAME, load=SimpleNamespace, run=_run)
