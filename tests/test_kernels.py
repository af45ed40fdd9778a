"""Built-in kernel definitions: cost models against seed 000's numbers, and their NKI kernels run on
numbers by the simulated NKI language (kernelsweep.sim.nki.values) at the edges of their shape rules.

The NKI kernels cannot run here for real. The simulated language executes their own source with
numpy behind every tile: an element no instruction wrote reads as an error (or stays NaN in the
output), so "every output element is written, with the reference's value, at LNC 1 and 2" is checked
on exactly the loops the real tracer would unroll, and `check()` is held to exactly those shapes.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

from kernelsweep.correctness import check_outputs
from kernelsweep.kernels import BUILTIN, InvalidShapeError, load_kernel
from kernelsweep.platforms import get_platform
from kernelsweep.sim.nki.generations import get_generation
from kernelsweep.sim.nki.trace import trace_kernel

SEED_000_MLP = {"b": 1, "s": 128, "h": 1024, "i": 512}
# Edge shapes: below one tile, one tile, ragged edges (h=640 was the old mlp's unwritten columns),
# several tiles, odd tile counts (uneven at LNC=2), single elements.
EDGES = {
    "mlp": [
        {"b": 1, "s": 1, "h": 1, "i": 1},
        {"b": 1, "s": 3, "h": 64, "i": 32},
        {"b": 2, "s": 50, "h": 130, "i": 129},
        {"b": 1, "s": 128, "h": 640, "i": 128},
        {"b": 1, "s": 300, "h": 256, "i": 384},
        {"b": 3, "s": 128, "h": 1024, "i": 256},
    ],
    "matmul": [
        {"M": 1, "K": 1, "N": 1},
        {"M": 1, "K": 4096, "N": 600},
        {"M": 127, "K": 129, "N": 513},
        {"M": 128, "K": 128, "N": 512},
        {"M": 300, "K": 200, "N": 1100},
        {"M": 512, "K": 256, "N": 2048},
    ],
    "vector_add": [
        {"n": 1, "partition_size": 1, "free_size": 1},
        {"n": 128, "partition_size": 128, "free_size": 1},
        {"n": 76800, "partition_size": 128, "free_size": 600},  # the old kernel dropped 88 of 600 columns
        {"n": 25600, "partition_size": 128, "free_size": 200},
        {"n": 4096, "partition_size": 64, "free_size": 16},
        {"n": 3 * 100 * 7, "partition_size": 100, "free_size": 7},
    ],
}


def _random_shapes(count: int = 12) -> list[tuple[str, dict]]:
    """Shapes drawn at random (fixed seed) across the tile boundaries: check() accepts every one."""
    rng = np.random.default_rng(9)
    shapes: list[tuple[str, dict]] = []
    for _ in range(count):
        b, s, h, i = (int(x) for x in rng.integers(1, (3, 260, 700, 300)))
        m, k, n = (int(x) for x in rng.integers(1, (300, 300, 1200)))
        parts, free, tiles = int(rng.integers(1, 129)), int(rng.integers(1, 300)), int(rng.integers(1, 5))
        shapes += [
            ("mlp", {"b": b, "s": s, "h": h, "i": i}),
            ("matmul", {"M": m, "K": k, "N": n}),
            ("vector_add", {"n": parts * free * tiles, "partition_size": parts, "free_size": free}),
        ]
    return shapes


def run_on_numbers(name: str, params: dict, dtype: str, lnc: int, generation: str = "0.6"):
    definition = load_kernel(BUILTIN[name])
    params = definition.resolve(params)
    definition.check(params, dtype)
    specs = [[(t.name, t.shape, t.dtype) for t in infos] for infos in (
        definition.input_infos(params, dtype), definition.output_infos(params, dtype))]  # fmt: skip
    arrays = definition.build_inputs(params, dtype, seed=11)
    traced = trace_kernel(definition.nki_kernel, *specs, get_generation(generation), lnc, values=arrays)
    return definition, params, arrays, traced


@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize(("name", "params"), [(n, p) for n, shapes in EDGES.items() for p in shapes] + _random_shapes())
def test_every_output_element_is_written_with_the_reference_value(name, params, lnc):
    dtype = "float32"
    definition, params, arrays, traced = run_on_numbers(name, params, dtype, lnc)
    for info in definition.output_infos(params, dtype):
        values, written = traced.outputs[info.name]
        assert written.all(), f"{name} {params} lnc={lnc}: {int((~written).sum())} of {written.size} elements unwritten"
        assert values.shape == info.shape
    expected = definition.reference(arrays, params)
    got = {k: v[0] for k, v in traced.outputs.items()}
    check = check_outputs(got, expected, dtype)
    assert check.passed, (name, params, lnc, check)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_bfloat16_runs_the_same_loops(name):
    definition, params, arrays, traced = run_on_numbers(name, EDGES[name][2], "bfloat16", 2)
    got = {k: v[0] for k, v in traced.outputs.items()}
    assert check_outputs(got, definition.reference(arrays, params), "bfloat16").passed


def test_vector_add_honours_both_tile_parameters():
    """Each swept tile shape is the kernel's own: 3 DMAs per tile (what the cost model charges), and
    a [partition_size, free_size] tile is what every DMA moves."""
    definition = load_kernel(BUILTIN["vector_add"])
    for parts, free in itertools.product((1, 32, 128), (1, 8, 200)):
        params = {"n": parts * free * 6, "partition_size": parts, "free_size": free}
        specs = [[(t.name, t.shape, t.dtype) for t in f(params, "float32")] for f in (
            definition.input_infos, definition.output_infos)]  # fmt: skip
        traced = trace_kernel(definition.nki_kernel, *specs, get_generation("0.6"), 1)
        assert traced.dma_count == definition.cost(params, "float32").dma_transfers == 3 * 6
        assert traced.programs[0]["vector_elems"] == params["n"]


@pytest.mark.parametrize(
    ("name", "params", "parallelism"),
    [
        ("vector_add", {"n": 128 * 64, "partition_size": 128, "free_size": 1}, 2.0),  # 64 tiles: split
        ("vector_add", {"n": 256000, "partition_size": 128, "free_size": 2000}, 1.0),  # one tile: one core
        ("matmul", {"M": 128, "K": 128, "N": 512}, 2.0),  # one output tile, split by columns
        ("mlp", SEED_000_MLP, 2.0),  # one 128-token chunk, halved
        ("mlp", {"b": 1, "s": 1, "h": 256, "i": 256}, 1.0),  # one token cannot be split
    ],
)
def test_kernels_share_their_work_across_the_two_cores_of_lnc_2(name, params, parallelism):
    definition = load_kernel(BUILTIN[name])
    params = definition.resolve(params)
    specs = [[(t.name, t.shape, t.dtype) for t in f(params, "bfloat16")] for f in (
        definition.input_infos, definition.output_infos)]  # fmt: skip
    assert trace_kernel(definition.nki_kernel, *specs, get_generation("0.6"), 2).parallelism == parallelism


def test_check_is_exactly_what_the_loops_handle():
    mlp, matmul, vector_add = (load_kernel(BUILTIN[k]) for k in ("mlp", "matmul", "vector_add"))
    matmul.check({"M": 1, "K": 4096, "N": 600}, "bfloat16")  # ragged N runs: the edge tile is smaller
    mlp.check({"b": 1, "s": 1, "h": 640, "i": 3}, "bfloat16")
    with pytest.raises(InvalidShapeError, match="M=0 must be positive"):
        matmul.check({"M": 0, "K": 128, "N": 128}, "bfloat16")
    with pytest.raises(InvalidShapeError, match="bytes of SBUF per partition"):  # x^T + act^T outgrow SBUF
        mlp.check({"b": 1, "s": 128, "h": 50000, "i": 50000}, "bfloat16")
    with pytest.raises(InvalidShapeError, match="n=4000 is not a whole number of 128x32 tiles"):
        vector_add.check({"n": 4000, "partition_size": 128, "free_size": 32}, "float32")
    with pytest.raises(InvalidShapeError, match="more than 196608"):
        vector_add.check({"n": 128 * 20000, "partition_size": 128, "free_size": 20000}, "float32")


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


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_nki_kernel_takes_the_definitions_inputs_by_name(name):
    """The tracer binds inputs to the NKI kernel's parameters by name. Read without importing `nki`."""
    definition = load_kernel(BUILTIN[name])
    module, _, function = definition.nki_kernel.partition(":")
    source = Path(importlib.util.find_spec(module).origin).read_text()
    kernel = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
    assert any(ast.unparse(d) == "nki.jit" for d in kernel.decorator_list)
    params = definition.resolve({a: 128 for a in definition.axes if a not in definition.defaults})
    tensors = [t.name for t in definition.input_infos(params, "bfloat16")]
    assert [a.arg for a in kernel.args.args] == tensors + list(definition.tunables)  # tunables by keyword, after
    named = zip(kernel.args.args[len(tensors) :], kernel.args.defaults, strict=True)
    defaults = {a.arg: ast.literal_eval(d) for a, d in named}
    assert defaults == definition.tunable_defaults  # what a point without tunables runs
