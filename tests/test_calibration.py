"""The simulator's performance model against the seeds' real measurements (issue 3, item 8).

Each seed configuration that maps onto a builtin kernel goes through the simulated tracer (so the
kernel definition's own cost()), becomes the Workload the simulated profiler builds from that IR, and
is predicted with jitter off. The band is the issue's: 0.5 <= predicted / measured <= 2. The measured
values are copied here from the seeds, independently of benchmarks/calibrate.py, so that a refit
cannot move them. docs/calibration.md has the same points as a table.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kernelsweep.kernels import BUILTIN, load_kernel
from kernelsweep.platforms import PLATFORMS
from kernelsweep.sim import model
from kernelsweep.sim.ir import read_ir
from kernelsweep.sim.model import Timing, Workload, predict, summary
from kernelsweep.sim.tracer import sim_trace
from kernelsweep.sim.views import workload as ir_workload
from kernelsweep.sweepspec.point import Point

MLP_SMALL = {"b": 1, "s": 128, "h": 1024, "i": 512}
MLP_LARGE = {"b": 1, "s": 256, "h": 2048, "i": 1024}


def _va(n: int, parts: int, free: int) -> dict[str, int]:
    return {"n": n, "partition_size": parts, "free_size": free}


# (id, kernel, params, dtype, lnc, measured microseconds), all trn2.
# Seed 000 (bf16, neuronx-cc --lnc 2): section 6's four totals and sections 1.2 / 3's 45.26 us.
# Seed 004 (float32 run_benchmark.py; no SPMD grid, so one physical core: lnc=1): steps 1 and 2a at
# n=25600, step 2b at n=256000 (FREE_DIM=2000 -> 1 tile, 3 DMAs, as the seed's profile reports).
SEED_POINTS = [
    ("000-s6-neuronxcc-s128", "mlp", MLP_SMALL, "bfloat16", 2, 39.36),
    ("000-s6-nkilib-s128", "mlp", MLP_SMALL, "bfloat16", 2, 43.22),
    ("000-s6-neuronxcc-s256", "mlp", MLP_LARGE, "bfloat16", 2, 67.21),
    ("000-s6-nkilib-s256", "mlp", MLP_LARGE, "bfloat16", 2, 85.26),
    ("000-s3-nkilib-profile-s128", "mlp", MLP_SMALL, "bfloat16", 2, 45.26),
    ("004-tiled-row-chunk-1", "vector_add", _va(25600, 1, 1), "float32", 1, 37318.0),
    ("004-tiled-row-chunk-128", "vector_add", _va(25600, 128, 1), "float32", 1, 378.0),
    ("004-stream-free-dim-2", "vector_add", _va(25600, 128, 2), "float32", 1, 186.0),
    ("004-stream-free-dim-200", "vector_add", _va(25600, 128, 200), "float32", 1, 15.0),
    ("004-stream-256k-free-dim-2000", "vector_add", _va(256000, 128, 2000), "float32", 1, 28.0),
    ("004-stream-256k-free-dim-1000", "vector_add", _va(256000, 128, 1000), "float32", 1, 26.0),
]
IDS = [p[0] for p in SEED_POINTS]

# Seed 000 section 3 and seed 002's raw record: total time and the profiler's cycle count.
SEED_000_TOTAL, SEED_000_CYCLES = 4.5256596e-05, 54307
SEED_002 = {
    "total_time": 0.213808050051,
    "neuroncore_cycle_count": 299331264,
    "hbm_read_bytes": 6582249472,
    "hbm_write_bytes": 1835008,
    "dma_transfer_count": 18935,
    "dma_active_time_percent": 0.26416618715491547,
}


def _workload(kernel: str, params: dict[str, int], dtype: str, lnc: int, tmp_path, platform: str = "trn2") -> Workload:
    """What the simulator predicts from: the simulated tracer's IR, read back as the profiler reads it."""
    point = Point(
        sweep="calibration",
        kernel=kernel,
        kernel_ref=BUILTIN[kernel],
        params=params,
        dtype=dtype,
        platform=platform,
        lnc=lnc,
        seed=0,
    )
    return ir_workload(read_ir(sim_trace(point, load_kernel(BUILTIN[kernel]), tmp_path)))


def _ratio(kernel, params, dtype, lnc, measured_us, tmp_path) -> float:
    return predict(_workload(kernel, params, dtype, lnc, tmp_path), jitter=0.0).total / (measured_us * 1e-6)


@pytest.mark.parametrize(("kernel", "params", "dtype", "lnc", "measured_us"), [p[1:] for p in SEED_POINTS], ids=IDS)
def test_seed_point_is_predicted_within_2x(kernel, params, dtype, lnc, measured_us, tmp_path):
    ratio = _ratio(kernel, params, dtype, lnc, measured_us, tmp_path)
    assert 0.5 <= ratio <= 2, f"predicted / measured = {ratio:.2f}"


@pytest.mark.parametrize(
    ("kernel", "params", "dtype", "lnc", "measured_us"),
    [p[1:] for p in SEED_POINTS if p[1] == "vector_add"],
    ids=[p[0] for p in SEED_POINTS if p[1] == "vector_add"],
)
def test_seed_004_stays_in_the_band_at_the_trn2_default_lnc_2(kernel, params, dtype, lnc, measured_us, tmp_path):
    """Seed 004's points are fitted at lnc=1; a sweep on trn2's default LNC=2 must not leave the band."""
    assert 0.5 <= _ratio(kernel, params, dtype, 2, measured_us, tmp_path) <= 2


def test_the_fit_is_tighter_than_the_band(tmp_path):
    """The whole seed set: the worst point is within 1.3x and the median within 1.15x (docs table)."""
    errors = sorted(max(r, 1 / r) for r in (_ratio(*p[1:], tmp_path) for p in SEED_POINTS))
    assert errors[-1] < 1.3 and errors[len(errors) // 2] < 1.15


@pytest.mark.parametrize(
    "perturbation",
    [
        {"launch_seconds": 4.0},
        {"per_dma_seconds": 3.0},
        {"per_dma_seconds": 1 / 3},
        {"memory_efficiency": 1 / 4},
        {"compute_efficiency": 1 / 8, "tensor_fixed_cycles": 4.0},
    ],
    ids=["launch-x4", "per-dma-x3", "per-dma-div3", "memory-eff-div4", "tensor-x4-to-x8"],
)
def test_a_mis_calibrated_model_fails_the_band(perturbation, monkeypatch, tmp_path):
    """The band has teeth: scaling a fitted constant by 3-8x pushes some seed point out of it."""
    cal = model.CALIBRATION["trn2"]
    monkeypatch.setitem(
        model.CALIBRATION, "trn2", replace(cal, **{k: getattr(cal, k) * f for k, f in perturbation.items()})
    )
    ratios = [_ratio(*p[1:], tmp_path) for p in SEED_POINTS]
    assert not all(0.5 <= r <= 2 for r in ratios)


def test_cycle_count_is_total_time_at_the_profiler_clock(tmp_path):
    """Seed 000: 45.256596 us <-> 54307 cycles at 1.2 GHz (trn2); seed 002: 1.4 GHz (trn1)."""
    w = _workload("mlp", MLP_SMALL, "bfloat16", 2, tmp_path)
    assert (
        summary(w, Timing(total=SEED_000_TOTAL, compute=1e-5, memory=1e-5, dma_overhead=0))["neuroncore_cycle_count"]
        == SEED_000_CYCLES
    )
    predicted = predict(w, jitter=0.0)
    cycles = summary(w, predicted)["neuroncore_cycle_count"]
    assert cycles == pytest.approx(predicted.total * 1.2e9, abs=1)
    trn1 = replace(w, platform=PLATFORMS["trn1"], lnc=1)
    total = SEED_002["total_time"]
    record = summary(trn1, Timing(total=total, compute=total, memory=0.0, dma_overhead=0.0))
    assert record["neuroncore_cycle_count"] == pytest.approx(SEED_002["neuroncore_cycle_count"], rel=1e-6)


@pytest.mark.slow  # predicts kernels of up to 8192 through the NKI simulator: seconds each
@pytest.mark.parametrize(("platform", "lnc"), [("trn2", 2), ("trn2", 1), ("trn1", 1), ("inf2", 1)])
def test_predictions_grow_with_problem_size(platform, lnc, tmp_path):
    def total(kernel, params, dtype):
        return predict(_workload(kernel, params, dtype, lnc, tmp_path, platform), jitter=0.0).total

    mlps = [
        {"b": 1, "s": s, "h": h, "i": i}
        for s, h, i in [(128, 1024, 512), (256, 2048, 1024), (512, 4096, 2048), (1024, 4096, 4096), (2048, 8192, 8192)]
    ]
    matmuls = [
        {"M": m, "K": k, "N": n}
        for m, k, n in [(128, 128, 512), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 8192)]
    ]
    adds = [_va(25600 * k, 128, 200) for k in (1, 2, 10, 100, 1000)]
    for kernel, sizes, dtype in [
        ("mlp", mlps, "bfloat16"),
        ("matmul", matmuls, "bfloat16"),
        ("vector_add", adds, "float32"),
    ]:
        times = [total(kernel, params, dtype) for params in sizes]
        assert all(a < b for a, b in zip(times, times[1:], strict=False)), (kernel, times)
        assert times[-1] > 5 * times[0], (kernel, times)  # not swamped by fixed costs at scale


def test_fewer_larger_tiles_are_faster_as_in_seed_004(tmp_path):
    """Seed 004's tile sweep at n=25600: ROW_CHUNK 1 > 128 > FREE_DIM 2 > FREE_DIM 200."""
    times = [
        predict(_workload("vector_add", _va(25600, p, f), "float32", 1, tmp_path), jitter=0.0).total
        for p, f in [(1, 1), (128, 1), (128, 2), (128, 200)]
    ]
    assert times == sorted(times, reverse=True)


def test_trn1_memory_side_is_consistent_with_seed_002():
    """Seed 002 is not our kernel and has no FLOP count, so it only checks trn1's carried-over DMA side:
    the model's memory + per-DMA time for its traffic must not exceed the measured DMA-active time (the
    DMA queues waited on the vector engine there) and must be within 2x of it."""
    s = SEED_002
    traffic = s["hbm_read_bytes"] + s["hbm_write_bytes"]
    w = Workload(
        platform=PLATFORMS["trn1"],
        lnc=1,
        dtype="float32",
        flops=1,
        hbm_bytes=traffic,
        input_bytes=s["hbm_read_bytes"],
        output_bytes=s["hbm_write_bytes"],
        dma_transfers=s["dma_transfer_count"],
        engine="vector",
    )
    timing = predict(w, jitter=0.0)
    dma_active = s["dma_active_time_percent"] * s["total_time"]
    assert 0.5 <= (timing.memory + timing.dma_overhead) / dma_active <= 1.0
