"""One result row per point: identity, status, metrics, derived figures, correctness, lineage.

`Row` is the union of the parts a row is assembled from, each of which declares its columns (one field
per column, with its type and a one-line docstring) beside the function that fills it; the Arrow schema
is derived from them (`schema.BASE_SCHEMA`; the profiler's summary fields travel together in `metrics`,
the grid parameters in `params`). It becomes a plain dict only at the Parquet boundary (`Row.record`),
where a key the schema lacks is an error, not a silent drop.
Failed points are rows too, with the stage, error class and message, and every artifact made before
the failure; their metric columns stay null, never zero.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from kernelsweep.profiles.metrics import METRIC_FIELDS
from kernelsweep.results.columns import PARAM_PREFIX
from kernelsweep.results.insight import Insight, insight_of
from kernelsweep.results.lineage import Lineage, lineage_of
from kernelsweep.results.outcome import SUMMARY_COLUMNS, RowSummary
from kernelsweep.results.row_identity import Identity, Provenance, identity_of, provenance_of
from kernelsweep.results.row_parts import Costed, Measured, Status, columns, costed_of, measured_of, status_of
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
class Row(Identity, Provenance, Status, Costed, Measured, Lineage, Insight):
    """The union of its parts, each of which declares its columns and sits beside what fills it; the
    dataset's column order is `schema.COLUMN_ORDER`."""

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
    record: PointRecord,
    *,
    flow_run_id: str,
    toolchain: str,
    is_simulation: bool,
    versions: ToolVersions,
    host: str | None = None,
) -> Row:
    """Where a value could come from two places, the precedence is explicit: versions are the host's
    unless the profile names what actually ran (`ToolVersions.updated_from`), the tracer is the one
    that traced this point (a cache hit's may be an earlier run's) else the host's, and `host` is the
    fleet's name for this host (`StageContext.host_name`) else the machine's."""
    point, extracted = record.point, record.extracted
    if extracted is not None:
        versions = versions.updated_from(extracted.metrics.info)
    costed = costed_of(point)
    lineage = lineage_of(record.trace, record.compiled, record.inputs, record.captured, extracted)
    lineage = replace(
        lineage, tracer=lineage.tracer or versions.tracer, nki_version=lineage.nki_version or versions.nki
    )
    return Row(
        **columns(identity_of(point, row_id(flow_run_id, point), toolchain=toolchain, is_simulation=is_simulation)),
        **columns(
            provenance_of(
                versions,
                host=host,
                flow_run_id=flow_run_id,
                task_run_ids=record.task_run_ids,
                started_at=record.started_at,
                finished_at=record.finished_at,
            )
        ),
        **columns(status_of(record.error, record.error_stage, extracted.correctness if extracted else None)),
        **columns(costed),
        **columns(lineage),
        **(columns(measured_of(point, costed, extracted)) if extracted is not None else {}),
        **columns(insight_of(point, record.trace, record.compiled, record.captured, extracted)),
    )


PARTS: tuple[type, ...] = Row.__bases__  # each declares its columns; Row is their union
