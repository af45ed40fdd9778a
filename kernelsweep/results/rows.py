"""One result row per point: identity, status, metrics, derived figures, correctness, lineage.

`Row` is the schema in Python: one field per column of `schema.BASE_SCHEMA` (the profiler's summary
fields travel together in `metrics`, the grid parameters in `params`), turned into a plain dict only
at the Parquet boundary (`Row.record`), where a key the schema lacks is an error, not a silent drop.
Failed points are rows too, with the stage, error class and message, and every artifact made before
the failure; their metric columns stay null, never zero.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any

from kernelsweep.artifacts import ArtifactRef
from kernelsweep.errors import KernelsweepError
from kernelsweep.kernels import load_kernel
from kernelsweep.metrics import METRIC_FIELDS
from kernelsweep.platforms import get_platform
from kernelsweep.results.schema import PARAM_PREFIX, SCHEMA_VERSION
from kernelsweep.results.summary import SUMMARY_COLUMNS, RowSummary
from kernelsweep.spec import Point
from kernelsweep.stages import CaptureResult, CompileResult, ExtractResult, InputsResult, TraceResult
from kernelsweep.toolchain.versions import ToolVersions

_ROW_NAMESPACE = uuid.UUID("5f0c8a3e-7b1d-4c1e-9a51-6b8f0e2d4c77")
METRIC_NAMES = frozenset(name for name, _ in METRIC_FIELDS)


@dataclass
class PointRecord:
    """What one point's chain produced, filled in stage by stage by the flow that runs the chain."""

    point: Point
    started_at: datetime
    finished_at: datetime | None = None
    trace: TraceResult | None = None
    compiled: CompileResult | None = None
    inputs: InputsResult | None = None
    captured: CaptureResult | None = None
    extracted: ExtractResult | None = None
    error: BaseException | None = None
    error_stage: str | None = None
    task_run_ids: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Row:
    # identity
    schema_version: int = SCHEMA_VERSION
    row_id: str
    sweep: str
    kernel: str
    kernel_ref: str
    shape: str
    params: dict[str, int]
    dtype: str
    platform: str
    lnc: int
    seed: int
    toolchain: str
    is_simulation: bool
    # status
    status: str
    error_stage: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    # the profiler's summary, normalised (kernelsweep.metrics), and where it came from
    metrics: Mapping[str, int | float | None] = field(default_factory=dict)
    extra_metrics: dict[str, float] | None = None
    profile_format: str | None = None
    profile_percent_unit: str | None = None
    profile_schema_version: str | None = None
    # derived
    cost_flops: int | None = None
    cost_hbm_bytes: int | None = None
    achieved_tflops: float | None = None
    mfu_percent: float | None = None
    roofline_us: float | None = None
    roofline_percent: float | None = None
    roofline_bound: str | None = None
    repeats: int | None = None
    latency_median_us: float | None = None
    latency_min_us: float | None = None
    latency_max_us: float | None = None
    latency_p90_us: float | None = None
    latency_p99_us: float | None = None
    # correctness
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    correct: bool | None = None
    # lineage
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
    compiler_version: str | None = None
    runtime_version: str | None = None
    profiler_version: str | None = None
    profiler_tool: str | None = None
    nki_version: str | None = None
    instance_type: str | None = None
    host: str | None = None
    visible_cores: str | None = None
    flow_run_id: str
    task_run_ids: dict[str, str] = field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    trace_seconds: float | None = None
    compile_seconds: float | None = None
    capture_seconds: float | None = None
    trace_cache_hit: bool | None = None
    compile_cache_hit: bool | None = None

    def __post_init__(self) -> None:
        unknown = set(self.metrics) - METRIC_NAMES
        if unknown:
            raise ValueError(f"metrics {sorted(unknown)} are not summary fields of the results schema")

    @property
    def total_time_us(self) -> float | None:
        value = self.metrics.get("total_time_us")
        return None if value is None else float(value)

    def record(self) -> dict[str, Any]:
        """The Parquet row: every column of the schema, metrics flattened, one `param_<axis>` per axis."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "metrics"}
        out.update({name: self.metrics.get(name) for name, _ in METRIC_FIELDS})
        out.update({PARAM_PREFIX + axis: value for axis, value in self.params.items()})
        return out

    def summary(self) -> RowSummary:
        values = {name: getattr(self, name) for name in SUMMARY_COLUMNS if name != "total_time_us"}
        return RowSummary(total_time_us=self.total_time_us, **values)


def row_id(flow_run_id: str, point: Point) -> str:
    """Stable for a (flow run, point) pair, so a retried store writes the same row."""
    return str(uuid.uuid5(_ROW_NAMESPACE, f"{flow_run_id}/{point.point_id}"))


def error_summary(error: BaseException) -> tuple[str, str]:
    """(error_class, one-line message) for a failed row."""
    if isinstance(error, KernelsweepError):
        return error.error_class, error.message
    return type(error).__name__, " ".join(str(error).split()) or type(error).__name__


def build_row(
    record: PointRecord, *, flow_run_id: str, toolchain: str, is_simulation: bool, versions: ToolVersions
) -> Row:
    """Where a value could come from two places, the precedence is explicit: versions are the host's
    unless the profile names what actually ran (`ToolVersions.updated_from`)."""
    point = record.point
    extracted = record.extracted
    if extracted is not None:
        versions = versions.updated_from(extracted.metrics.info)
    return Row(
        row_id=row_id(flow_run_id, point),
        sweep=point.sweep,
        kernel=point.kernel,
        kernel_ref=point.kernel_ref,
        shape=point.shape,
        params=dict(point.params),
        dtype=point.dtype,
        platform=point.platform,
        lnc=point.lnc,
        seed=point.seed,
        toolchain=toolchain,
        is_simulation=is_simulation,
        host=socket.gethostname(),
        compiler_version=versions.compiler,
        runtime_version=versions.runtime,
        profiler_version=versions.profiler,
        profiler_tool=versions.profiler_tool,
        instance_type=versions.instance_type,
        flow_run_id=flow_run_id,
        task_run_ids=dict(record.task_run_ids),
        started_at=record.started_at,
        finished_at=record.finished_at,
        **_status(record),
        **({"tracer": versions.tracer, "nki_version": versions.nki} | _lineage(record)),
        **_figures(point, extracted),
    )


def _status(record: PointRecord) -> dict[str, Any]:
    if record.error is None:
        return {"status": "ok"}
    error_class, message = error_summary(record.error)
    return {"status": "failed", "error_stage": record.error_stage, "error_class": error_class, "error_message": message}


def _figures(point: Point, extracted: ExtractResult | None) -> dict[str, Any]:
    """The cost model and roofline (known before anything runs), then what the profile measured."""
    cost = load_kernel(point.kernel_ref).cost(point.params, point.dtype)
    platform = get_platform(point.platform)
    roofline = platform.roofline(cost.flops, cost.hbm_bytes, point.dtype, point.lnc)
    figures: dict[str, Any] = {
        "cost_flops": cost.flops,
        "cost_hbm_bytes": cost.hbm_bytes,
        "roofline_us": roofline.seconds * 1e6,
        "roofline_bound": roofline.bound,
    }
    if extracted is None:
        return figures
    metrics, latency, checked = extracted.metrics, extracted.latency, extracted.correctness
    figures |= {
        "metrics": dict(metrics.values),
        "extra_metrics": {k: float(v) for k, v in metrics.extra.items() if v is not None},
        "profile_format": metrics.source_format,
        "profile_percent_unit": metrics.percent_unit,
        "profile_schema_version": _text(metrics.info.get("profile_schema_version")),
    }
    total_s = float(metrics.values.get("total_time_us") or 0) * 1e-6
    if total_s > 0:  # a zero time is a broken profile: no rate is better than an infinite one
        figures |= {
            "achieved_tflops": cost.flops / total_s / 1e12,
            "mfu_percent": 100 * cost.flops / total_s / platform.peak_flops(point.dtype, point.lnc),
            "roofline_percent": 100 * roofline.seconds / total_s,
        }
    return figures | {
        "repeats": latency.repeats,
        "latency_median_us": latency.median_us,
        "latency_min_us": latency.min_us,
        "latency_max_us": latency.max_us,
        "latency_p90_us": latency.p90_us,
        "latency_p99_us": latency.p99_us,
        "max_abs_error": checked.max_abs_error,
        "max_rel_error": checked.max_rel_error,
        "atol": checked.atol,
        "rtol": checked.rtol,
        "correct": checked.passed,
    }


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _refs(name: str, ref: ArtifactRef | None) -> dict[str, str]:
    return {f"{name}_uri": ref.uri, f"{name}_sha256": ref.sha256} if ref else {}


def _ref_list(refs: dict[str, ArtifactRef]) -> list[dict[str, Any]]:
    return [{"name": n, **asdict(r)} for n, r in refs.items()]


def _lineage(record: PointRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if record.trace:
        out |= _refs("kernel_source", record.trace.kernel_source) | _refs("ir", record.trace.ir)
        out |= {"tracer": record.trace.tracer, "trace_seconds": record.trace.seconds}
        if record.trace.nki_version:  # what traced this point, which a cache hit may have done earlier
            out["nki_version"] = record.trace.nki_version
        out["trace_cache_hit"] = record.trace.cache_hit
    if record.compiled:
        out |= _refs("neff", record.compiled.neff)
        out |= {"compile_seconds": record.compiled.seconds, "compile_cache_hit": record.compiled.cache_hit}
    if record.inputs:
        out["inputs"] = _ref_list(record.inputs.inputs)
    if record.captured:
        out |= _refs("ntff", record.extracted.ntff if record.extracted else record.captured.ntffs[0])
        out |= {"outputs": _ref_list(record.captured.outputs), "visible_cores": record.captured.visible_cores}
        out["capture_seconds"] = record.captured.seconds
    if record.extracted:
        out |= _refs("profile", record.extracted.profile)
    return out
