"""Element-wise vector add (seed 004): out = a + b, processed in [partition_size, free_size] tiles.

The tile shape is a parameter because choosing it is the whole exercise in the seed; a partition
size over 128 is the architecture error users hit first.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kernelsweep.kernels.base import InvalidShapeError, KernelDefinition, Params, TensorInfo

PARTITION_LIMIT = 128


class VectorAdd(KernelDefinition):
    name = "vector_add"
    nki_kernel = "kernelsweep.kernels.nki.vector_add:vector_add_kernel"
    axes = ("n", "partition_size", "free_size")
    defaults = {"partition_size": 128, "free_size": 1}
    dtypes = ("float32", "bfloat16", "float16")
    engine = "vector"

    def check(self, params: Params, dtype: str) -> None:
        n, parts, free = params["n"], params["partition_size"], params["free_size"]
        if parts > PARTITION_LIMIT:
            raise InvalidShapeError(
                f"number of partitions {parts} exceeds the architecture limit of {PARTITION_LIMIT}; "
                f"use partition_size <= {PARTITION_LIMIT}"
            )
        if min(n, parts, free) <= 0:
            raise InvalidShapeError("n, partition_size and free_size must be positive")
        if n % (parts * free):
            raise InvalidShapeError(
                f"n={n} is not a whole number of {parts}x{free} tiles; "
                f"pick n divisible by partition_size*free_size={parts * free}"
            )

    def input_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        return [TensorInfo("a", (params["n"],), dtype), TensorInfo("b", (params["n"],), dtype)]

    def output_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        return [TensorInfo("out", (params["n"],), dtype)]

    def reference(self, inputs: Mapping[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        return {"out": inputs["a"].astype(np.float64) + inputs["b"].astype(np.float64)}

    def model_flops(self, params: Params) -> int:
        return params["n"]

    def dma_transfers(self, params: Params, tensor_count: int) -> int:
        """Two loads and one store per tile: the per-tile cost the seed's tile sweep exposes."""
        tiles = params["n"] // (params["partition_size"] * params["free_size"])
        return 3 * tiles


vector_add = VectorAdd()
