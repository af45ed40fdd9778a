"""Element-wise vector add (seed 004): out = a + b, processed in [partition_size, free_size] tiles.

The tile shape is a parameter because choosing it is the whole exercise in the seed; a partition
size over 128 is the architecture error users hit first. The NKI kernel is handed each vector viewed
as [tiles, partition_size, free_size] (the same bytes as the flat vector of n elements), so the
swept tile shape is the kernel's own tile shape: two loads, one add and one store per tile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kernelsweep.dtypes import itemsize
from kernelsweep.kernels.base import (
    SBUF_PARTITION_BYTES,
    InvalidShapeError,
    KernelDefinition,
    Params,
    TensorInfo,
    Tunables,
    Unrolled,
    require_positive,
)

if TYPE_CHECKING:
    import numpy as np

PARTITION_LIMIT = 128
TILES_IN_SBUF = 3  # a, b and the sum, per partition


class VectorAdd(KernelDefinition):
    name = "vector_add"
    nki_kernel = "kernelsweep.kernels.nki.vector_add:vector_add_kernel"
    axes = ("n", "partition_size", "free_size")
    defaults = {"partition_size": 128, "free_size": 1}
    dtypes = ("float32", "bfloat16", "float16")
    engine = "vector"

    def check(self, params: Params, dtype: str) -> None:
        parts, free = params["partition_size"], params["free_size"]
        if parts > PARTITION_LIMIT:
            raise InvalidShapeError(
                f"number of partitions {parts} exceeds the architecture limit of {PARTITION_LIMIT}; "
                f"use partition_size <= {PARTITION_LIMIT}"
            )
        require_positive(params, "n", "partition_size", "free_size")
        self._tiles(params)
        if TILES_IN_SBUF * free * itemsize(dtype) > SBUF_PARTITION_BYTES:
            raise InvalidShapeError(
                f"free_size={free} {dtype} needs {TILES_IN_SBUF * free * itemsize(dtype)} bytes of SBUF per "
                f"partition for its three tiles, more than {SBUF_PARTITION_BYTES}; use a smaller free_size"
            )

    def _tiles(self, params: Params) -> int:
        n, parts, free = params["n"], params["partition_size"], params["free_size"]
        if n % (parts * free):
            raise InvalidShapeError(
                f"n={n} is not a whole number of {parts}x{free} tiles; "
                f"pick n divisible by partition_size*free_size={parts * free}"
            )
        return n // (parts * free)

    def input_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        shape = (self._tiles(params), params["partition_size"], params["free_size"])
        return [TensorInfo("a", shape, dtype), TensorInfo("b", shape, dtype)]

    def output_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        return [TensorInfo("out", (self._tiles(params), params["partition_size"], params["free_size"]), dtype)]

    def reference(self, inputs: Mapping[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        import numpy as np

        return {"out": inputs["a"].astype(np.float64) + inputs["b"].astype(np.float64)}

    def model_flops(self, params: Params) -> int:
        return params["n"]

    def unrolled(self, params: Params, tunables: Tunables | None = None) -> Unrolled:
        """Two loads, an add and a store per tile."""
        return Unrolled(4 * self._tiles(params), "n")

    def dma_transfers(self, params: Params, tensor_count: int) -> int:
        """Two loads and one store per tile: the per-tile cost the seed's tile sweep exposes."""
        return 3 * self._tiles(params)


vector_add = VectorAdd()
