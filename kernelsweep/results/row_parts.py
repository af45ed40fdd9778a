"""The parts a row is assembled from, each a small frozen record whose fields are `Row`'s columns.

`build_row` merges them (`columns`); a misspelt or mistyped field fails `tests/test_rows.py`'s
parity check at once instead of at a run's first row. The parts follow the order in which a point
learns things: its cost and roofline before anything runs, its status, what each stage left behind
(lineage), and what the profile and the correctness check measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from kernelsweep.correctness import Correctness
from kernelsweep.errors import KernelsweepError
from kernelsweep.kernels import load_kernel
from kernelsweep.platforms import get_platform
from kernelsweep.profiles.metrics import LatencyStats
from kernelsweep.results.columns import FAILED, INCORRECT, OK
from kernelsweep.results.insight import Insight
from kernelsweep.stage_results import CaptureResult, CompileResult, ExtractResult, InputsResult, TraceResult
from kernelsweep.stores.artifacts import ArtifactRef
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain.tracing import tracer_label


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


@dataclass(frozen=True)
class Status:
    status: str
    error_stage: str | None = None
    error_class: str | None = None
    error_message: str | None = None

    @classmethod
    def of(cls, error: BaseException | None, stage: str | None, checked: Correctness | None = None) -> Status:
        if error is not None:
            error_class, message = error_summary(error)
            return cls(FAILED, stage, error_class, message)
        if checked is not None and not checked.passed:
            return cls(INCORRECT, CHECK_STAGE, "IncorrectOutput", checked.message())
        return cls(OK)


@dataclass(frozen=True)
class Costed:
    """The cost model and roofline: known before anything runs, so a failed row has them too."""

    cost_flops: int
    cost_hbm_bytes: int
    roofline_us: float
    roofline_bound: str

    @classmethod
    def of(cls, point: Point) -> Costed:
        cost = load_kernel(point.kernel_ref).cost(point.params, point.dtype)
        roofline = get_platform(point.platform).roofline(cost.flops, cost.hbm_bytes, point.dtype, point.lnc)
        return cls(cost.flops, cost.hbm_bytes, roofline.seconds * 1e6, roofline.bound)


@dataclass(frozen=True)
class Measured:
    """What the profile and the correctness check said, and the rates derived from them."""

    metrics: Mapping[str, int | float | None]
    extra_metrics: dict[str, float] | None
    profile_format: str | None
    profile_percent_unit: str | None
    profile_schema_version: str | None
    profile_entries: int | None
    dge_notifs: bool | None
    dma_unreliable: bool | None
    achieved_tflops: float | None
    mfu_percent: float | None
    hw_mfu_percent: float | None
    roofline_percent: float | None
    repeats: int | None
    latency_median_us: float | None
    latency_min_us: float | None
    latency_max_us: float | None
    latency_p90_us: float | None
    latency_p99_us: float | None
    latencies_us: list[float] | None
    max_abs_error: float | None
    max_rel_error: float | None
    atol: float | None
    rtol: float | None
    correct: bool | None
    correctness_source: str | None
    timing_source: str | None

    @classmethod
    def of(cls, point: Point, costed: Costed, extracted: ExtractResult) -> Measured:
        metrics, latency, checked = extracted.metrics, extracted.latency, extracted.correctness
        total_s = float(metrics.values.get("total_time_us") or 0) * 1e-6
        rates: tuple[float | None, float | None, float | None] = (None, None, None)
        hardware_mfu = None
        if total_s > 0:  # a zero time is a broken profile: no rate is better than an infinite one
            platform = get_platform(point.platform)
            peak = platform.peak_flops(point.dtype, point.lnc)
            flops = costed.cost_flops
            rates = (flops / total_s / 1e12, 100 * flops / total_s / peak, 100 * costed.roofline_us * 1e-6 / total_s)
            hardware, transpose = metrics.values.get("hardware_flops"), metrics.values.get("transpose_flops")
            if hardware is not None:
                hardware_mfu = platform.hardware_mfu_percent(hardware, transpose or 0, total_s, point.lnc)
        schema = metrics.info.get("profile_schema_version") or metrics.schema.version
        return cls(
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
        )


@dataclass(frozen=True)
class Lineage:
    """Every artifact the point made before it ended (a failed point keeps what it got to), and how
    each stage went: which tracer, how long, whether a cache served it."""

    kernel_source_uri: str | None = None
    kernel_source_sha256: str | None = None
    ir_uri: str | None = None
    ir_sha256: str | None = None
    neff_uri: str | None = None
    neff_sha256: str | None = None
    inputs: list[dict[str, Any]] | None = None
    ntff_uri: str | None = None
    ntff_sha256: str | None = None
    profile_uri: str | None = None
    profile_sha256: str | None = None
    outputs: list[dict[str, Any]] | None = None
    tracer: str | None = None
    nki_version: str | None = None
    visible_cores: str | None = None
    trace_seconds: float | None = None
    compile_seconds: float | None = None
    capture_seconds: float | None = None
    trace_cache_hit: bool | None = None
    compile_cache_hit: bool | None = None
    compile_options: str | None = None
    nki_compiler_frontend: str | None = None
    neff_compile_host: str | None = None  # schema 4: where the NEFF came from (kernelsweep.stages.HOST_META)
    neff_debug_info: bool | None = None  # schema 5: what shaped the NEFF
    alloc_fallback: bool | None = None

    @classmethod
    def of(
        cls,
        trace: TraceResult | None,
        compiled: CompileResult | None,
        inputs: InputsResult | None,
        captured: CaptureResult | None,
        extracted: ExtractResult | None,
    ) -> Lineage:
        ntff = extracted.ntff if extracted else captured.ntffs[0] if captured else None
        return cls(
            **_refs("kernel_source", trace.kernel_source if trace else None),
            **_refs("ir", trace.ir if trace else None),
            **_refs("neff", compiled.neff if compiled else None),
            **_refs("ntff", ntff),
            **_refs("profile", extracted.profile if extracted else None),
            inputs=_ref_list(inputs.inputs) if inputs else None,
            outputs=_ref_list(captured.outputs) if captured else None,
            tracer=tracer_label(trace.tracer, trace.fell_through) if trace else None,
            nki_version=trace.nki_version if trace else None,  # what traced it: a cache hit may have, earlier
            visible_cores=captured.visible_cores if captured else None,
            trace_seconds=trace.seconds if trace else None,
            compile_seconds=compiled.seconds if compiled else None,
            capture_seconds=captured.seconds if captured else None,
            trace_cache_hit=trace.cache_hit if trace else None,
            compile_cache_hit=compiled.cache_hit if compiled else None,
            compile_options=compiled.compile_options if compiled else trace.compile_options if trace else None,
            nki_compiler_frontend=trace.nki_compiler_frontend if trace else None,
            neff_compile_host=compiled.compile_host if compiled else None,
            neff_debug_info=compiled.debug_info if compiled else None,
            alloc_fallback=compiled.alloc_fallback if compiled else None,
        )


def _refs(name: str, ref: ArtifactRef | None) -> dict[str, str | None]:
    return {f"{name}_uri": ref.uri if ref else None, f"{name}_sha256": ref.sha256 if ref else None}


def _ref_list(refs: Mapping[str, ArtifactRef]) -> list[dict[str, Any]]:
    return [{"name": n, **asdict(r)} for n, r in refs.items()]


PARTS = (Status, Costed, Measured, Lineage, Insight)  # Insight: schema 3's columns, in their own module
