"""One result row per point: identity, status, metrics, derived figures, correctness, lineage.

`Row` declares the columns: one field per column, in the dataset's column order, and the Arrow schema
is derived from it (`schema.BASE_SCHEMA`; the profiler's summary fields travel together in `metrics`,
the grid parameters in `params`). It becomes a plain dict only at the Parquet boundary (`Row.record`),
where a key the schema lacks is an error, not a silent drop.
Failed points are rows too, with the stage, error class and message, and every artifact made before
the failure; their metric columns stay null, never zero.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from kernelsweep.profiles.metrics import METRIC_FIELDS
from kernelsweep.results.columns import PARAM_PREFIX, SCHEMA_VERSION
from kernelsweep.results.insight import Insight
from kernelsweep.results.outcome import SUMMARY_COLUMNS, RowSummary
from kernelsweep.results.row_parts import Costed, Lineage, Measured, Status, columns
from kernelsweep.stage_results import CaptureResult, CompileResult, ExtractResult, InputsResult, TraceResult
from kernelsweep.sweepspec.point import Point
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
    # the profiler's summary, normalised (kernelsweep.profiles.metrics), and where it came from
    metrics: Mapping[str, int | float | None] = field(default_factory=dict)
    extra_metrics: dict[str, float] | None = None
    profile_format: str | None = None
    profile_percent_unit: str | None = None
    profile_schema_version: str | None = None
    profile_entries: int | None = None
    dge_notifs: bool | None = None
    dma_unreliable: bool | None = None
    # derived
    cost_flops: int | None = None
    cost_hbm_bytes: int | None = None
    achieved_tflops: float | None = None
    mfu_percent: float | None = None
    hw_mfu_percent: float | None = None
    roofline_us: float | None = None
    roofline_percent: float | None = None
    roofline_bound: str | None = None
    repeats: int | None = None
    latency_median_us: float | None = None
    latency_min_us: float | None = None
    latency_max_us: float | None = None
    latency_p90_us: float | None = None
    latency_p99_us: float | None = None
    latencies_us: list[float] | None = None
    # correctness
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    correct: bool | None = None
    correctness_source: str | None = None
    timing_source: str | None = None
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
    compile_options: str | None = None
    nki_compiler_frontend: str | None = None
    # variant: tunables (`tile_m=128,loop_order=mn`), named toolchain, search trial; null when absent
    tunables: str | None = None
    toolchain_name: str | None = None
    search_trial: int | None = None
    # schema 3: why slow, against what, at what cost (kernelsweep.results.insight)
    bound_engine: str | None = None
    bound_active_percent: float | None = None
    bound_why: str | None = None
    baseline_ref: str | None = None
    baseline_of: str | None = None
    speedup_vs_baseline: float | None = None
    hotspots: list[dict[str, Any]] | None = None
    hotspots_note: str | None = None
    nki_source_uri: str | None = None
    nki_source_sha256: str | None = None
    compile_peak_rss_bytes: int | None = None
    compile_cpu_seconds: float | None = None
    compile_memory_limit_bytes: int | None = None
    iterations: int | None = None
    iteration_latencies_us: list[float] | None = None
    iteration_median_us: float | None = None
    iteration_p99_us: float | None = None
    iteration_tool: str | None = None
    # schema 4: the host whose compiler built the NEFF (a compile-farm host's when it came from the store)
    neff_compile_host: str | None = None
    # schema 5: what shaped the NEFF: compiled with NKI_DEBUG_INFO; NKI's allocator fell back to neuronx-cc's
    neff_debug_info: bool | None = None
    alloc_fallback: bool | None = None

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


def build_row(
    record: PointRecord, *, flow_run_id: str, toolchain: str, is_simulation: bool, versions: ToolVersions
) -> Row:
    """Where a value could come from two places, the precedence is explicit: versions are the host's
    unless the profile names what actually ran (`ToolVersions.updated_from`), and the tracer is the
    one that traced this point (a cache hit's may be an earlier run's) else the host's."""
    point, extracted = record.point, record.extracted
    if extracted is not None:
        versions = versions.updated_from(extracted.metrics.info)
    costed = Costed.of(point)
    lineage = Lineage.of(record.trace, record.compiled, record.inputs, record.captured, extracted)
    lineage = replace(
        lineage, tracer=lineage.tracer or versions.tracer, nki_version=lineage.nki_version or versions.nki
    )
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
        tunables=point.tunables_text or None,
        toolchain_name=point.toolchain_name or None,
        search_trial=point.search_trial,
        **columns(Status.of(record.error, record.error_stage, extracted.correctness if extracted else None)),
        **columns(costed),
        **columns(lineage),
        **(columns(Measured.of(point, costed, extracted)) if extracted is not None else {}),
        **columns(Insight.of(point, record.trace, record.compiled, record.captured, extracted)),
    )
