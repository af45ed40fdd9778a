"""Tiled matrix multiply (seed 003's shape sweeps): out[M, N] = lhsT[K, M].T @ rhs[K, N].

The stationary operand is passed transposed, as NKI's TensorEngine consumes it; the 128x128 PE
array and the 512-wide moving tile cap the tiles. The NKI kernel handles edge tiles, so any positive
M, K, N runs. Its tunables (tile sizes and loop order, kernels/nki/matmul.py says what each does)
are valid when the block of the outer operand it keeps in SBUF fits there.
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
    tiles,
)

if TYPE_CHECKING:
    import numpy as np


class Matmul(KernelDefinition):
    name = "matmul"
    nki_kernel = "kernelsweep.kernels.nki.matmul:matmul_kernel"
    axes = ("M", "K", "N")
    dtypes = ("bfloat16", "float16", "float32")
    tunables = {
        "tile_m": (128, 64, 32),
        "tile_n": (512, 256, 128, 64),
        "tile_k": (128, 64, 32),
        "loop_order": ("mn", "nm"),
    }
    tunable_defaults = {"tile_m": 128, "tile_n": 512, "tile_k": 128, "loop_order": "mn"}
    timed_from_trace = True

    def check(self, params: Params, dtype: str) -> None:
        require_positive(params, "M", "K", "N")

    def check_tunables(self, params: Params, tunables: Tunables, dtype: str) -> None:
        """The kept block (all of K for one outer tile) plus a streamed tile and a result tile, per
        partition, must fit one SBUF partition."""
        t = {**self.tunable_defaults, **tunables}
        tile_m, tile_n = min(int(t["tile_m"]), params["M"]), min(int(t["tile_n"]), params["N"])
        tile_k = min(int(t["tile_k"]), params["K"])
        outer, inner = (tile_m, tile_n) if t["loop_order"] == "mn" else (tile_n, tile_m)
        needed = (tiles(params["K"], tile_k) * outer + 2 * inner) * itemsize(dtype)
        if needed > SBUF_PARTITION_BYTES:
            raise InvalidShapeError(
                f"loop_order={t['loop_order']} keeps K/tile_k x {outer} elements per partition: {needed} bytes, more "
                f"than an SBUF partition's {SBUF_PARTITION_BYTES}; use a larger tile_k or the other loop order"
            )

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

    def unrolled(self, params: Params, tunables: Tunables | None = None) -> Unrolled:
        """Per output tile: a load and a matmul per K tile, then a copy and a store; per outer block, a
        load per K tile (at the default tiles, 128 x 512 x 128)."""
        t = {**self.tunable_defaults, **(tunables or {})}
        counts = {
            "M": tiles(params["M"], int(t["tile_m"])),
            "N": tiles(params["N"], int(t["tile_n"])),
            "K": tiles(params["K"], int(t["tile_k"])),
        }
        outer = counts["M"] if t["loop_order"] == "mn" else counts["N"]
        instructions = counts["M"] * counts["N"] * (2 * counts["K"] + 2) + outer * counts["K"]
        return Unrolled(instructions, max(counts, key=counts.__getitem__))


matmul = Matmul()
