"""The simulated tracer refuses, per NKI generation, what that generation refuses, reading the
kernel's real source: the built-in kernels pass every `nki` generation; the kernels as they stood
before issue 9 (tests/fixtures/nki_kernels/old_*.py) and one small kernel per rule do not.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kernelsweep.errors import TraceError
from kernelsweep.kernels import BUILTIN, load_kernel
from kernelsweep.kernels.vector_add import VectorAdd
from kernelsweep.sim.nki.generations import GENERATIONS, get_generation
from kernelsweep.sim.nki.tensor import NkiError, NkiTensor, Storage
from kernelsweep.sim.nki.trace import trace_kernel
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import tracing

FIXTURES = Path(__file__).parent / "fixtures" / "nki_kernels"
CURRENT = ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7")
PARSING = CURRENT[:-1]  # NKI 0.7 specializes by running the kernel: it sees only what runs
A = [("a", (128, 512), "float32")]


@pytest.fixture(autouse=True)
def kernel_fixtures(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))


def shapes(name: str, params: dict, dtype: str = "bfloat16") -> tuple[list, list]:
    definition = load_kernel(BUILTIN[name])
    params = definition.resolve(params)
    return tuple(
        [(t.name, t.shape, t.dtype) for t in infos(params, dtype)]
        for infos in (definition.input_infos, definition.output_infos)
    )


POINTS = {
    "mlp": {"b": 1, "s": 256, "h": 1024, "i": 640},
    "matmul": {"M": 256, "K": 1024, "N": 1536},
    "vector_add": {"n": 25600, "partition_size": 128, "free_size": 20},
}


@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("generation", CURRENT)
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_the_builtin_kernels_trace_on_every_nki_generation(name, generation, lnc):
    if (name, generation) == ("mlp", "0.1"):
        pytest.skip("NKI 0.1's shared_hbm reshape bug: test_the_mlp_fails_on_nki_0_1")
    traced = trace_kernel(
        load_kernel(BUILTIN[name]).nki_kernel, *shapes(name, POINTS[name]), get_generation(generation), lnc
    )
    assert traced.unmodelled == () and traced.warnings == ()  # every call they make is checked
    assert traced.parallelism == lnc


def test_the_mlp_fails_on_nki_0_1():
    """SDK 2.27's NKI 0.1 fails the partition size check when a shared_hbm tensor is reshaped (fixed in
    0.2.0, SDK release notes); the MLP reshapes its input and output (real-host audit 2, N7)."""
    with pytest.raises(NkiError, match=r"reshape of a shared_hbm tensor \(1, 256, 1024\) into \(256, 1024\)"):
        trace_kernel(load_kernel(BUILTIN["mlp"]).nki_kernel, *shapes("mlp", POINTS["mlp"]), get_generation("0.1"), 1)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_the_legacy_sdk_has_no_nki_package(name):
    with pytest.raises(ModuleNotFoundError, match="No module named 'nki'"):
        trace_kernel(load_kernel(BUILTIN[name]).nki_kernel, *shapes(name, POINTS[name]), get_generation("legacy"), 1)


# (kernel, generations that refuse it, what they say); every other generation in CURRENT accepts it
RULES = [
    ("fine", (), None),
    ("too_many_partitions", CURRENT, "number of partitions 256 exceed architecture limitation of 128"),
    ("moving_too_wide", CURRENT, "moving free size 1024 exceeds gemm_moving_fmax 512"),
    ("psum_over_a_bank", CURRENT, "needs 4096 bytes per partition, more than one PSUM bank"),
    ("block_dimension", CURRENT, "has no attribute 'par_dim'"),
    ("psum_copy", ("0.1", "0.2", "0.4", "0.5"), "(has no attribute 'copy'|cross-buffer copies .* are not supported)"),
    ("language_load", ("0.1", "0.2"), "has no attribute 'store'"),
    ("output_in_private_hbm", ("0.3", "0.4", "0.5", "0.6", "0.7"), "output tensors must use nl.shared_hbm"),
    ("accumulate_flag", ("0.1", "0.2"), "nc_matmul\\(\\) got an unexpected keyword argument 'accumulate'"),
    ("neuronxcc_inside", ("0.4", "0.5", "0.6", "0.7"), "neuronxcc.nki.* inside an NKI kernel is a compilation error"),
    # the published signatures: a keyword no generation's nisa.tensor_copy takes, an instruction none has
    ("misspelt_keyword", CURRENT, "tensor_copy\\(\\) got an unexpected keyword argument 'engin'"),
    ("unknown_instruction", CURRENT, "module 'nki.isa' has no attribute 'tensor_add'"),
    ("dma_priority", ("0.1", "0.2", "0.3"), "dma_copy\\(\\) got an unexpected keyword argument 'priority'"),
    # a parsing front end refuses what a branch never taken holds; 0.7's tracing one never sees it
    ("dead_branch_par_dim", PARSING, "has no attribute 'par_dim'"),
    ("dynamic_loop", ("0.7",), "has no attribute 'dynamic_range'"),
]


@pytest.mark.parametrize("generation", CURRENT)
@pytest.mark.parametrize(("kernel", "refused_by", "message"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_is_enforced_by_exactly_the_generations_that_have_it(kernel, refused_by, message, generation):
    run = lambda: trace_kernel(f"nki_rule_kernels:{kernel}", A, A, get_generation(generation), 1)  # noqa: E731
    if generation in refused_by:
        with pytest.raises((NkiError, AttributeError, TypeError, ValueError), match=message):
            run()
    else:
        run()


def test_an_unwritten_output_region_is_seen_on_numbers():
    import numpy as np

    a = np.ones((128, 512), dtype=np.float32)
    traced = trace_kernel("nki_rule_kernels:unwritten_columns", A, A, get_generation("0.6"), 1, values={"a": a})
    _, written = traced.outputs["a"]
    assert written[:, :256].all() and not written[:, 256:].any()


# The kernels as they stood before issue 9, per generation: what the simulated tracer says.
OLD = [
    ("old_mlp", "legacy", "No module named 'nki'"),
    *(("old_mlp", g, "has no attribute 'par_dim'") for g in CURRENT),
    *(("old_matmul", g, "has no attribute 'zeros'") for g in ("0.1", "0.2")),
    *(("old_matmul", g, r"unsupported operand type\(s\) for \+=: 'NkiTensor' and 'NkiTensor'") for g in CURRENT[2:]),
    *(("old_vector_add", g, "has no attribute 'load'") for g in ("0.1", "0.2")),
]
OLD_SHAPES = {
    "old_mlp": shapes("mlp", POINTS["mlp"]),
    "old_matmul": shapes("matmul", POINTS["matmul"]),
    "old_vector_add": ([("a", (25600,), "float32"), ("b", (25600,), "float32")], [("out", (25600,), "float32")]),
}


@pytest.mark.parametrize(("kernel", "generation", "message"), OLD, ids=[f"{k}-{g}" for k, g, _ in OLD])
def test_the_old_kernels_fail_where_a_real_host_would(kernel, generation, message):
    ref = f"old_{kernel.removeprefix('old_')}:{kernel.removeprefix('old_')}_kernel"
    with pytest.raises((NkiError, AttributeError, TypeError, ModuleNotFoundError), match=message):
        trace_kernel(ref, *OLD_SHAPES[kernel], get_generation(generation), 1)


def test_the_old_vector_add_ignored_its_tile_parameters_and_dropped_columns():
    """It traces on 0.3+, but its DMAs do not follow partition_size/free_size, and at n/128 = 600
    columns it leaves 88 of them unwritten: what the new shape rules and kernel fixed."""
    import numpy as np

    one = ([("a", (128 * 600,), "float32"), ("b", (128 * 600,), "float32")], [("out", (128 * 600,), "float32")])
    arrays = {"a": np.ones(128 * 600, np.float32), "b": np.ones(128 * 600, np.float32)}
    traced = trace_kernel("old_vector_add:vector_add_kernel", *one, get_generation("0.6"), 1, values=arrays)
    _, written = traced.outputs["out"]
    assert int((~written).sum()) == 128 * 88
    cost = VectorAdd().cost({"n": 128 * 600, "partition_size": 128, "free_size": 1}, "float32")
    assert traced.dma_count == 3 != cost.dma_transfers == 3 * 600  # the sim modelled 600 tiles it never ran


def test_every_generation_is_named_in_the_table():
    assert set(GENERATIONS) == {"legacy", *CURRENT}


def test_the_trace_worker_reports_a_refused_kernel_as_a_deterministic_error(tmp_path):
    """The production path: the sim toolchain's tracer in its worker process, a definition whose NKI
    kernel is the old mlp."""
    old = type("OldMLP", (type(load_kernel(BUILTIN["mlp"])),), {"nki_kernel": "old_mlp:mlp_kernel"})()
    point = Point(
        sweep="t", kernel="mlp", kernel_ref=BUILTIN["mlp"], params=POINTS["mlp"] | {"b": 1}, dtype="bfloat16",
        platform="trn2", lnc=2, seed=0,
    )  # fmt: skip
    request = tracing.TraceRequest.for_point(point, old, "trn2")
    with pytest.raises(TraceError) as info:
        tracing.trace(sim_toolchain(tmp_path / "sim"), request, tmp_path / "work", tracer=None, timeout_seconds=120)
    # NKI 0.7 (the simulator's default) runs the kernel to trace it: the removed API fails as it runs
    assert info.value.error_class == "NkiApiMissing" and not info.value.retryable
    assert "AttributeError: module 'nki.language' has no attribute 'par_dim'" in info.value.message


def test_a_tiled_index_takes_the_fast_path_to_the_view_the_general_one_gives():
    """`NkiTensor.__getitem__` answers a step-less in-bounds slice per axis without the general walk;
    every key, taken or not, gives the view (or the error) the general `_indexed` gives."""
    hbm = NkiTensor(Storage((256, 8, 1024), "float32", "hbm"), (256, 8, 1024))
    sbuf = NkiTensor(Storage((128, 2048), "bfloat16", "sbuf"), (128, 2048))[0:96, 512:1536]
    rng = random.Random(7)
    bounds = [None, -3, 0, 1, 5, 95, 96, 97, 127, 511, 1024, 1025]
    taken = 0
    for tensor in (hbm, sbuf):
        for _ in range(400):
            tiled = rng.random() < 0.5  # an in-bounds tile, as kernels index; else anything
            key = tuple(
                _tile(rng, size)
                if tiled
                else slice(rng.choice(bounds), rng.choice(bounds), rng.choice([None, None, None, 1, 2]))
                if rng.random() < 0.85
                else rng.choice([0, 3, -1])
                for size in tensor.shape
            )
            results = []
            for index in (tensor.__getitem__, tensor._indexed):
                try:
                    view = index(key)
                    results.append((view.shape, view.offset, view.strides))
                except NkiError as exc:
                    results.append(str(exc))
            assert results[0] == results[1], key
            taken += tensor._in_bounds_slices(key) is not None
    assert taken > 100  # the fast path was exercised, not only the fallback


def _tile(rng, size: int) -> slice:
    start = rng.randrange(size)
    stop = rng.randrange(start + 1, size + 1)
    return slice(rng.choice([start, None]) if start == 0 else start, rng.choice([stop, None]) if stop == size else stop)
