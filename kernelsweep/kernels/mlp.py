"""Gated MLP (seed 000's nkilib MLP): out = (silu(x @ Wg) * (x @ Wu)) @ Wd."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kernelsweep.kernels.base import KernelDefinition, Params, TensorInfo, require_tiled


class MLP(KernelDefinition):
    name = "mlp"
    nki_kernel = "kernelsweep.kernels.nki.mlp:mlp_kernel"
    axes = ("b", "s", "h", "i")
    defaults = {"b": 1}
    dtypes = ("bfloat16", "float16", "float32")

    def check(self, params: Params, dtype: str) -> None:
        require_tiled("b*s", params["b"] * params["s"], 128, "partition")
        require_tiled("h", params["h"], 128, "partition")
        require_tiled("i", params["i"], 128, "partition")

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
        x = inputs["hidden_tensor"].astype(np.float64)
        gate = x @ inputs["gate_proj_weights_tensor"].astype(np.float64)
        up = x @ inputs["up_proj_weights_tensor"].astype(np.float64)
        act = gate / (1.0 + np.exp(-gate)) * up
        return {"out": act @ inputs["down_proj_weights_tensor"].astype(np.float64)}

    def model_flops(self, params: Params) -> int:
        b, s, h, i = (params[k] for k in self.axes)
        return 3 * 2 * b * s * h * i


mlp = MLP()
