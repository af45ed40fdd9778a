"""The bounding-engine rule (kernelsweep.profiles.bounding) on the seeds' real profiles, and each of its
thresholds at its edge: just at it the rule fires, just under it does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelsweep.profiles.bounding import (
    BUSY_PERCENT,
    MEMORY_BOUND_MBU_PERCENT,
    OVERHEAD,
    SATURATED_PERCENT,
    bounding_engine,
)
from kernelsweep.profiles.metrics import normalise_record, read_profile

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"


def _engines(**percent: float) -> dict[str, float]:
    """A normalised summary with these engines' active percents (dma as `dma`), the rest idle."""
    values = {f"{e}_engine_active_time_percent": 0.0 for e in ("tensor", "vector", "scalar", "gpsimd")}
    values["dma_active_time_percent"] = 0.0
    for engine, value in percent.items():
        field = "dma_active_time_percent" if engine == "dma" else f"{engine}_engine_active_time_percent"
        values[field] = value
    return values


def test_seed_002_is_vector_engine_bound():
    """Seed 002's raw summary-json record (fractions): Vector Engine 96.45% active, the day it took by hand."""
    record = next(iter(json.loads((FIXTURES / "seed002_summary.json").read_text()).values()))
    bound = bounding_engine(normalise_record(record, "summary-json").values)
    assert bound is not None and bound.engine == "vector"
    assert bound.active_percent == pytest.approx(96.45, abs=0.01)
    assert "compute-bound on the Vector Engine" in bound.why and "96.5% active" in bound.why


def test_seed_000_mlp_is_bound_by_the_tensor_engine_its_hand_analysis_compares():
    """Seed 000 compares the two MLP kernels by their Tensor Engine time (45.74% active, DMA 45.20%):
    no engine near saturation, the Tensor Engine the busiest, more than half of the time idle."""
    bound = bounding_engine(read_profile(FIXTURES / "seed000_full.json").values)
    assert bound is not None and bound.engine == "tensor"
    assert bound.active_percent == pytest.approx(45.74, abs=0.01)
    assert (
        "partly bound by the Tensor Engine" in bound.why and "idle 54.3%" in bound.why and "next dma 45.2%" in bound.why
    )


def test_decode_attention_on_inf2_is_vector_bound_as_its_author_says():
    """aws-neuron/nki-samples#133: Vector 41.5% active, DMA 5.5%, "Vector-bound"."""
    bound = bounding_engine(_engines(vector=41.5, dma=5.5))
    assert bound is not None and (bound.engine, bound.active_percent) == ("vector", 41.5)


@pytest.mark.parametrize(
    ("busiest", "expected"), [(SATURATED_PERCENT, "compute-bound"), (SATURATED_PERCENT - 0.01, "partly")]
)
def test_saturated_percent_is_where_an_engine_becomes_compute_bound(busiest, expected):
    bound = bounding_engine(_engines(scalar=busiest, vector=30.0))
    assert bound is not None and bound.engine == "scalar" and expected in bound.why


def test_a_saturated_dma_is_memory_bound_and_the_busiest_saturated_engine_wins():
    dma = bounding_engine(_engines(dma=SATURATED_PERCENT + 5, tensor=SATURATED_PERCENT + 1))
    assert dma is not None and dma.engine == "dma" and "memory-bound (DMA)" in dma.why


@pytest.mark.parametrize(
    ("mbu", "engine"), [(MEMORY_BOUND_MBU_PERCENT, "dma"), (MEMORY_BOUND_MBU_PERCENT - 0.01, "vector")]
)
def test_memory_bound_mbu_percent_makes_a_point_memory_bound_whatever_engine_is_busiest(mbu, engine):
    bound = bounding_engine({**_engines(vector=70.0, dma=30.0), "mbu_estimated_percent": mbu})
    assert bound is not None and bound.engine == engine
    if engine == "dma":
        assert bound.active_percent == 30.0 and "memory-bound on HBM bandwidth" in bound.why


@pytest.mark.parametrize(("busiest", "engine"), [(BUSY_PERCENT, "gpsimd"), (BUSY_PERCENT - 0.01, OVERHEAD)])
def test_busy_percent_is_the_floor_under_which_the_point_is_overhead_bound(busiest, engine):
    bound = bounding_engine(_engines(gpsimd=busiest, tensor=10.0))
    assert bound is not None and bound.engine == engine and bound.active_percent == busiest
    if engine == OVERHEAD:
        assert f"idle at least {100 - busiest:.1f}%" in bound.why and "busiest gpsimd" in bound.why


def test_a_profile_without_engine_times_has_no_bound():
    assert bounding_engine({"total_time_us": 10.0, "mbu_estimated_percent": 99.0}) is None
