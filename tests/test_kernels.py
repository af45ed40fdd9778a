"""Built-in kernel definitions: cost models against seed 000's numbers, and their NKI kernels' signatures."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kernelsweep.kernels import BUILTIN, InvalidShapeError, load_kernel
from kernelsweep.platforms import get_platform

SEED_000_MLP = {"b": 1, "s": 128, "h": 1024, "i": 512}


def test_mlp_cost_matches_seed_000():
    cost = load_kernel(BUILTIN["mlp"]).cost(SEED_000_MLP, "bfloat16")
    assert cost.hbm_bytes == 3_670_016  # the profile's inputs_outputs_weights_size_bytes
    assert cost.flops * 1.0625 == 427_819_008  # the profile's hardware_flops counts transposes on top
    # the profile's mfu_estimated_percent (5.66) is model FLOPs over trn2's LNC=2 peak at 45.26 us
    mfu = cost.flops / 45.256596e-6 / get_platform("trn2").peak_flops("bfloat16", lnc=2)
    assert round(100 * mfu, 2) == 5.66


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_reference_shapes_and_determinism(name):
    definition = load_kernel(BUILTIN[name])
    params = definition.resolve({a: 128 for a in definition.axes if a not in definition.defaults})
    inputs = definition.build_inputs(params, "float32", seed=3)
    again = definition.build_inputs(params, "float32", seed=3)
    assert all(np.array_equal(inputs[k], again[k]) for k in inputs)
    outputs = definition.reference(inputs, params)
    for info in definition.output_infos(params, "float32"):
        assert outputs[info.name].shape == info.shape and np.all(np.isfinite(outputs[info.name]))


def test_matmul_tiling_rules():
    matmul = load_kernel(BUILTIN["matmul"])
    matmul.check({"M": 1, "K": 4096, "N": 4096}, "bfloat16")  # LLM decode
    with pytest.raises(InvalidShapeError, match="N=600 is not a multiple of the moving free-size tile 512"):
        matmul.check({"M": 128, "K": 128, "N": 600}, "bfloat16")


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_nki_kernel_takes_the_definitions_inputs_by_name(name):
    """The tracer binds inputs to the NKI kernel's parameters by name. Read without importing `nki`."""
    definition = load_kernel(BUILTIN[name])
    module, _, function = definition.nki_kernel.partition(":")
    source = Path(importlib.util.find_spec(module).origin).read_text()
    kernel = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
    assert any(ast.unparse(d) == "nki.jit" for d in kernel.decorator_list)
    params = definition.resolve({a: 128 for a in definition.axes if a not in definition.defaults})
    assert [a.arg for a in kernel.args.args] == [t.name for t in definition.input_infos(params, "bfloat16")]
