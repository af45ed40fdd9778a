"""The parts a row is assembled from: each a small frozen record whose fields declare `Row`'s columns
(`Row` is their union), next to the function that fills it.

A field is one column: its annotation gives the Arrow type (kernelsweep.results.schema), its docstring
the one line a reader needs; docs/schema.md says the rest. The parts follow the order in which a point
learns things: its cost and roofline before anything runs, its status, what each stage left behind
(kernelsweep.results.lineage), and what the profile and the correctness check measured. The row's
identity and provenance are in kernelsweep.results.row_identity, schema 3's insight columns in
kernelsweep.results.insight.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kernelsweep.correctness import Correctness
from kernelsweep.errors import KernelsweepError
from kernelsweep.kernels import load_kernel
from kernelsweep.platforms import get_platform
from kernelsweep.profiles.metrics import LatencyStats
from kernelsweep.results.columns import FAILED, INCORRECT, OK, Int32
from kernelsweep.stage_results import ExtractResult
from kernelsweep.sweepspec.point import Point


def columns(part: object) -> dict[str, Any]:
    """A part as `Row` keyword arguments (shallow: dict values are the part's own)."""
    return {f.name: getattr(part, f.name) for f in fields(part)}  # type: ignore[arg-type]


def latency_columns(latency: LatencyStats) -> dict[str, Any]:
    """A point's repeats as the row's latency columns (a sweep's captures, or `compare --confirm`'s)."""
    return {
        "repeats": latency.repeats,
        "latency_median_us": latency.median_us,
        "latency_min_us": latency.min_us,
        "latency_max_us": latency.max_us,
        "latency_p90_us": latency.p90_us,
        "latency_p99_us": latency.p99_us,
        "latencies_us": list(latency.latencies_us),
    }


def error_summary(error: BaseException) -> tuple[str, str]:
    """(error_class, one-line message) for a failed row."""
    if isinstance(error, KernelsweepError):
        return error.error_class, error.message
    return type(error).__name__, " ".join(str(error).split()) or type(error).__name__


CHECK_STAGE = "check"  # an incorrect row's error stage: measured, but the output is outside tolerance


@dataclass(frozen=True, kw_only=True)
class Status:
    status: str
    """`ok`, `failed`, `incorrect` (measured, output outside tolerance) or `confirmation`."""
    error_stage: str | None = None
    """The stage that failed; `check` for an incorrect row."""
    error_class: str | None = None
    """The failure's class, e.g. `CompileError`; `IncorrectOutput` for an incorrect row."""
    error_message: str | None = None
    """One line from the tool or the stage."""


def status_of(error: BaseException | None, stage: str | None, checked: Correctness | None = None) -> Status:
    if error is not None:
        error_class, message = error_summary(error)
        return Status(status=FAILED, error_stage=stage, error_class=error_class, error_message=message)
    if checked is not None and not checked.passed:
        return Status(
            status=INCORRECT, error_stage=CHECK_STAGE, error_class="IncorrectOutput", error_message=checked.message()
        )
    return Status(status=OK)


@dataclass(frozen=True, kw_only=True)
class Costed:
    """The cost model and roofline: known before anything runs, so a failed row has them too."""

    cost_flops: int | None = None
    """FLOPs by the kernel definition's cost model (2 per multiply-accumulate)."""
    cost_hbm_bytes: int | None = None
    """Minimum HBM traffic by the cost model: every input read once, every output written once."""
    roofline_us: float | None = None
    """The roofline's lower bound on the time for one logical core."""
    roofline_bound: str | None = None
    """`compute` or `memory`: which side of the roofline bounds the point."""


def costed_of(point: Point) -> Costed:
    cost = load_kernel(point.kernel_ref).cost(point.params, point.dtype)
    roofline = get_platform(point.platform).roofline(cost.flops, cost.hbm_bytes, point.dtype, point.lnc)
    return Costed(
        cost_flops=cost.flops,
        cost_hbm_bytes=cost.hbm_bytes,
        roofline_us=roofline.seconds * 1e6,
        roofline_bound=roofline.bound,
    )


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What the profile and the correctness check said, and the rates derived from them; all null on a
    row that failed before extraction."""

    metrics: Mapping[str, int | float | None] = field(default_factory=dict)
    """The profiler's summary fields, normalised: one column each (kernelsweep.profiles.metrics)."""
    extra_metrics: dict[str, float] | None = None
    """Summary fields the schema does not name yet, under their normalised names."""
    profile_format: str | None = None
    """`json`, `summary-json` or `parquet`: the profiler output the metrics came from."""
    profile_percent_unit: str | None = None
    """`fraction` or `percent`: the unit the profile's percents were in."""
    profile_schema_version: str | None = None
    """The profile schema the fields were read in."""
    profile_entries: Int32 | None = None
    """Summary entries combined into the metrics (one per physical core where written)."""
    dge_notifs: bool | None = None
    """The reported capture collected DGE notifications."""
    dma_unreliable: bool | None = None
    """The profiler warned that its DMA figures may be understated."""
    achieved_tflops: float | None = None
    """`cost_flops / total_time` in TFLOP/s."""
    mfu_percent: float | None = None
    """`cost_flops / total_time` over the platform's dense peak for the dtype and LNC, 0-100."""
    hw_mfu_percent: float | None = None
    """nki-library's MFU from the profiler's hardware FLOPs, 0-100."""
    roofline_percent: float | None = None
    """`roofline_us / total_time_us`, 0-100: how close the point came to its bound."""
    repeats: Int32 | None = None
    """Captures of the point's NEFF; the metrics are the median-latency one's."""
    latency_median_us: float | None = None
    """Median `total_time_us` across the repeats."""
    latency_min_us: float | None = None
    """Least `total_time_us` across the repeats."""
    latency_max_us: float | None = None
    """Greatest `total_time_us` across the repeats."""
    latency_p90_us: float | None = None
    """90th percentile of `total_time_us` across the repeats."""
    latency_p99_us: float | None = None
    """99th percentile of `total_time_us` across the repeats."""
    latencies_us: list[float] | None = None
    """Every repeat's `total_time_us`, in capture order (schema 2)."""
    dropped_reason: str | None = None
    """A search trial captured no further, why: the best it lost to, by how much, after how many captures (schema 7)."""
    max_abs_error: float | None = None
    """Max absolute difference between the captured output and the float64 reference."""
    max_rel_error: float | None = None
    """Max of `abs error / abs(reference)`."""
    atol: float | None = None
    """The dtype's absolute tolerance."""
    rtol: float | None = None
    """The dtype's relative tolerance."""
    correct: bool | None = None
    """Every element within `atol + rtol * abs(reference)`; null when nothing was checked."""
    correctness_source: str | None = None
    """What produced the outputs checked: `device`, `nki.simulate`, `simulator` or `unchecked: <why>`."""
    timing_source: str | None = None
    """What the times come from: `device` or `simulator`."""


def measured_of(point: Point, costed: Costed, extracted: ExtractResult) -> Measured:
    metrics, latency, checked = extracted.metrics, extracted.latency, extracted.correctness
    total_s = float(metrics.values.get("total_time_us") or 0) * 1e-6
    rates: tuple[float | None, float | None, float | None] = (None, None, None)
    hardware_mfu = None
    if total_s > 0 and costed.cost_flops is not None and costed.roofline_us is not None:
        # a zero time is a broken profile: no rate is better than an infinite one
        platform = get_platform(point.platform)
        peak = platform.peak_flops(point.dtype, point.lnc)
        flops = costed.cost_flops
        rates = (flops / total_s / 1e12, 100 * flops / total_s / peak, 100 * costed.roofline_us * 1e-6 / total_s)
        hardware, transpose = metrics.values.get("hardware_flops"), metrics.values.get("transpose_flops")
        if hardware is not None:
            hardware_mfu = platform.hardware_mfu_percent(hardware, transpose or 0, total_s, point.lnc)
    schema = metrics.info.get("profile_schema_version") or metrics.schema.version
    return Measured(
        metrics=dict(metrics.values),
        extra_metrics={k: float(v) for k, v in metrics.extra.items() if v is not None},
        profile_format=metrics.source_format,
        profile_percent_unit=metrics.percent_unit,
        profile_schema_version=None if schema is None else str(schema),
        profile_entries=metrics.entries,
        dge_notifs=extracted.dge_notifs,
        dma_unreliable=extracted.dma_warning is not None,
        achieved_tflops=rates[0],
        mfu_percent=rates[1],
        hw_mfu_percent=hardware_mfu,
        roofline_percent=rates[2],
        **latency_columns(latency),
        max_abs_error=checked.max_abs_error if checked else None,
        max_rel_error=checked.max_rel_error if checked else None,
        atol=checked.atol if checked else None,
        rtol=checked.rtol if checked else None,
        correct=checked.passed if checked else None,
        correctness_source=extracted.correctness_source,
        timing_source=extracted.timing_source,
        dropped_reason=extracted.dropped,
    )
