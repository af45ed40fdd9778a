"""Gated MLP (seed 000's nkilib MLP): out = (silu(x @ Wg) * (x @ Wu)) @ Wd.

The NKI kernel handles edge tiles, so any positive b, s, h, i runs as long as one token chunk's
x^T and act^T tiles fit in SBUF together (the kernel keeps both for the whole chunk).
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

P = 128
WORKING_BYTES = 32 * 2**10  # per partition, for the tiles the kernel streams (weights, PSUM copies)


class MLP(KernelDefinition):
    name = "mlp"
    nki_kernel = "kernelsweep.kernels.nki.mlp:mlp_kernel"
    axes = ("b", "s", "h", "i")
    defaults = {"b": 1}
    dtypes = ("bfloat16", "float16", "float32")

    def check(self, params: Params, dtype: str) -> None:
        require_positive(params, *self.axes)
        b, s, h, i = (params[k] for k in self.axes)
        chunk = min(P, b * s)
        kept = (-(-h // P) + -(-i // P)) * chunk * itemsize(dtype)  # x^T and act^T tiles, per partition
        if kept > SBUF_PARTITION_BYTES - WORKING_BYTES:
            raise InvalidShapeError(
                f"h={h} and i={i} need {kept} bytes of SBUF per partition for one token chunk's x^T and "
                f"act^T tiles, more than {SBUF_PARTITION_BYTES - WORKING_BYTES}; use smaller h or i"
            )

    def input_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        b, s, h, i = (params[k] for k in self.axes)
        return [
            TensorInfo("hidden_tensor", (b, s, h), dtype),
            TensorInfo("gate_proj_weights_tensor", (h, i), dtype),
            TensorInfo("up_proj_weights_tensor", (h, i), dtype),
            TensorInfo("down_proj_weights_tensor", (i, h), dtype),
        ]

    def output_infos(self, params: Params, dtype: str) -> list[TensorInfo]:
        return [TensorInfo("out", (params["b"], params["s"], params["h"]), dtype)]

    def input_scale(self, info: TensorInfo, params: Params) -> float:
        fan_in = info.shape[0]
        return 1.0 if info.name == "hidden_tensor" else float(fan_in) ** -0.5

    def reference(self, inputs: Mapping[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        import numpy as np

        x = inputs["hidden_tensor"].astype(np.float64)
        gate = x @ inputs["gate_proj_weights_tensor"].astype(np.float64)
        up = x @ inputs["up_proj_weights_tensor"].astype(np.float64)
        act = gate / (1.0 + np.exp(-gate)) * up
        return {"out": act @ inputs["down_proj_weights_tensor"].astype(np.float64)}

    def model_flops(self, params: Params) -> int:
        b, s, h, i = (params[k] for k in self.axes)
        return 3 * 2 * b * s * h * i

    def unrolled(self, params: Params, tunables: Tunables | None = None) -> Unrolled:
        """Per chunk of 128 tokens: x^T (load, transpose, copy per 128 of h); per 128 of i, two loads and
        two matmuls per 128 of h, then the activation and the product; per 512 of h, a load and a
        matmul per 128 of i, then a copy and a store."""
        b, s, h, i = (params[k] for k in self.axes)
        chunks, h_tiles, i_tiles, out_tiles = tiles(b * s, P), tiles(h, P), tiles(i, P), tiles(h, 512)
        per_chunk = 3 * h_tiles + i_tiles * (4 * h_tiles + 2) + out_tiles * (2 * i_tiles + 2)
        counts = {("s" if s >= b else "b"): chunks, "h": h_tiles, "i": i_tiles}
        return Unrolled(chunks * per_chunk, max(counts, key=counts.__getitem__))


mlp = MLP()
