"""Tiled matrix multiply (seed 003's shape sweeps): out[M, N] = lhsT[K, M].T @ rhs[K, N].

The stationary operand is passed transposed, as NKI's TensorEngine consumes it; the 128x128 PE
array and the 512-wide moving tile set the tile boundaries the seed sweeps across. The NKI kernel
handles edge tiles, so any positive M, K, N runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kernelsweep.kernels.base import KernelDefinition, Params, TensorInfo, Unrolled, require_positive, tiles

if TYPE_CHECKING:
    import numpy as np


class Matmul(KernelDefinition):
    name = "matmul"
    nki_kernel = "kernelsweep.kernels.nki.matmul:matmul_kernel"
    axes = ("M", "K", "N")
    dtypes = ("bfloat16", "float16", "float32")

    def check(self, params: Params, dtype: str) -> None:
        require_positive(params, "M", "K", "N")

    def input_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        m, k, n = params["M"], params["K"], params["N"]
        return [TensorInfo("lhsT", (k, m), dtype), TensorInfo("rhs", (k, n), dtype)]

    def output_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        return [TensorInfo("out", (params["M"], params["N"]), dtype)]

    def input_scale(self, info: TensorInfo, params: Params) -> float:
        return float(params["K"]) ** -0.25

    def reference(self, inputs: Mapping[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        import numpy as np

        lhs_t = inputs["lhsT"].astype(np.float64)
        return {"out": lhs_t.T @ inputs["rhs"].astype(np.float64)}

    def model_flops(self, params: Params) -> int:
        return 2 * params["M"] * params["K"] * params["N"]

    def unrolled(self, params: Params) -> Unrolled:
        """Per output tile of 128 x 512: two loads and a matmul per 128 of K, then a copy and a store."""
        counts = {"M": tiles(params["M"], 128), "N": tiles(params["N"], 512), "K": tiles(params["K"], 128)}
        instructions = counts["M"] * counts["N"] * (3 * counts["K"] + 2)
        return Unrolled(instructions, max(counts, key=counts.__getitem__))


matmul = Matmul()
