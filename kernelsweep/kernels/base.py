"""What a kernel definition must provide so that kernelsweep can sweep it.

A definition is plain Python and never imports NKI: the NKI kernel itself is named by an import
path and loaded only by the real toolchain's tracer. Everything else the pipeline needs (inputs,
reference outputs, the cost model, shape rules) is numpy, so specs validate and the simulated
toolchain runs on any machine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from kernelsweep.dtypes import itemsize, numpy_dtype
from kernelsweep.errors import InvalidShapeError

if TYPE_CHECKING:
    import numpy as np

Params = Mapping[str, int]
Tunables = Mapping[str, int | str]

__all__ = [
    "Cost",
    "InvalidShapeError",
    "KernelDefinition",
    "Params",
    "SBUF_PARTITION_BYTES",
    "TensorInfo",
    "Tunables",
    "Unrolled",
    "require_positive",
    "tiles",
]


@dataclass(frozen=True)
class Cost:
    flops: int  # model FLOPs (2 per multiply-accumulate; 1 per element-wise op)
    hbm_bytes: int  # minimum HBM traffic: every input read once, every output written once
    dma_transfers: int  # DMA descriptors issued; small tiles pay a fixed cost per transfer
    engine: str  # the engine doing the FLOPs: "tensor" or "vector"


@dataclass(frozen=True)
class Unrolled:
    """How many instructions a point's NKI kernel unrolls to (NKI unrolls every loop: real-host audit 2,
    N5), and the axis that drives the count: what a refused shape's message says to shrink."""

    instructions: int
    axis: str


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str


class KernelDefinition:
    """Base for kernel definitions; subclasses fill the class attributes and the four methods."""

    name: ClassVar[str]
    nki_kernel: ClassVar[str]  # "module:function" of the NKI kernel, imported only on Neuron hosts
    axes: ClassVar[tuple[str, ...]]  # every parameter the kernel takes
    defaults: ClassVar[dict[str, int]] = {}  # values for axes a spec may leave out
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "bfloat16")
    engine: ClassVar[str] = "tensor"
    # Tunables: keyword arguments of the NKI kernel that change how it runs, not what it computes (tile
    # sizes, loop order), each with the values it may take; a spec sweeps them or searches over them.
    tunables: ClassVar[dict[str, tuple[int | str, ...]]] = {}
    tunable_defaults: ClassVar[dict[str, int | str]] = {}  # what the NKI kernel uses when none is given
    # True: the simulator times this kernel from what its trace did (DMAs issued, HBM bytes moved,
    # TensorE passes), which its tunables change; False: from `cost()`, the term the calibration fits.
    timed_from_trace: ClassVar[bool] = False

    def check(self, params: Params, dtype: str) -> None:
        """Raise InvalidShapeError for points the kernel declares invalid."""

    def check_tunables(self, params: Params, tunables: Tunables, dtype: str) -> None:
        """Raise InvalidShapeError for tunable values the kernel cannot run at this shape."""

    def input_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        raise NotImplementedError

    def output_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        raise NotImplementedError

    def reference(self, inputs: Mapping[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        """The numpy result, computed in float64 from the inputs as given."""
        raise NotImplementedError

    def model_flops(self, params: Params) -> int:
        raise NotImplementedError

    def cost(self, params: Params, dtype: str) -> Cost:
        infos = self.input_infos(params, dtype) + self.output_infos(params, dtype)
        hbm_bytes = sum(math.prod(t.shape) * itemsize(t.dtype) for t in infos)
        return Cost(
            flops=self.model_flops(params),
            hbm_bytes=hbm_bytes,
            dma_transfers=self.dma_transfers(params, len(infos)),
            engine=self.engine,
        )

    def unrolled(self, params: Params, tunables: Tunables | None = None) -> Unrolled | None:
        """The kernel's unrolled instruction count, when the definition knows it (the spec drops
        points past `execution.max_unrolled_instructions`); None: unknown, never dropped."""
        return None

    def dma_transfers(self, params: Params, tensor_count: int) -> int:
        """By default one bulk transfer per tensor; tiled kernels override this."""
        return tensor_count

    def build_inputs(self, params: Params, dtype: str, seed: int) -> dict[str, np.ndarray]:
        """Deterministic inputs named as the NEFF's inputs, scaled so outputs stay O(1)."""
        import numpy as np  # deferred: sizing a point (spec checks, the simulated tracer) needs no numpy

        rng = np.random.default_rng(seed)
        arrays = {}
        for info in self.input_infos(params, dtype):
            scale = self.input_scale(info, params)
            values = rng.standard_normal(info.shape, dtype=np.float32) * scale
            arrays[info.name] = values.astype(numpy_dtype(info.dtype))
        return arrays

    def input_scale(self, info: TensorInfo, params: Params) -> float:
        return 1.0

    def resolve(self, params: Params) -> dict[str, int]:
        """The full parameter set: spec values over the kernel's defaults."""
        return {**self.defaults, **params}


SBUF_PARTITION_BYTES = 192 * 2**10  # per partition; the smallest of the platforms' SBUFs (reference section 7)


def require_positive(params: Params, *names: str) -> None:
    for name in names:
        if params[name] <= 0:
            raise InvalidShapeError(f"{name}={params[name]} must be positive")


def tiles(size: int, tile: int) -> int:
    """How many tiles of at most `tile` cover `size` (the last may be smaller)."""
    return -(-size // tile)
