"""What a sweep reports back: a few columns per row and the objects it wrote.

The CLI's table, the Prefect table artifact and `kernelsweep lineage` all show `SUMMARY_COLUMNS`;
the full rows live in the Parquet objects. A flow returns a `SweepOutcome`, which stays small however
many points the sweep has.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class RowSummary:
    row_id: str
    sweep: str
    kernel: str
    shape: str
    dtype: str
    platform: str
    status: str
    error_stage: str | None
    error_class: str | None
    error_message: str | None
    total_time_us: float | None
    achieved_tflops: float | None
    mfu_percent: float | None
    roofline_percent: float | None
    correct: bool | None
    is_simulation: bool
    flow_run_id: str

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RowSummary:
        """From a row as read back from Parquet (a dict with every column)."""
        values: dict[str, Any] = {name: record.get(name) for name in SUMMARY_COLUMNS}
        return cls(**values)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


SUMMARY_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RowSummary))


@dataclass(frozen=True)
class SweepOutcome:
    """A flow run's outcome: its id, the Parquet objects it wrote, and one summary per point."""

    flow_run_id: str
    paths: list[str] = field(default_factory=list)
    rows: list[RowSummary] = field(default_factory=list)
    left_for_other_hosts: dict[str, int] = field(default_factory=dict)  # platform -> points not run here

    @property
    def failed(self) -> int:
        return sum(not row.ok for row in self.rows)

    @classmethod
    def merge(cls, flow_run_id: str, reports: Iterable[SweepOutcome]) -> SweepOutcome:
        """A parent run's report over its shard runs' reports."""
        reports = list(reports)
        left: Counter[str] = Counter()
        for report in reports:
            left.update(report.left_for_other_hosts)
        return cls(
            flow_run_id=flow_run_id,
            paths=[path for report in reports for path in report.paths],
            rows=[row for report in reports for row in report.rows],
            left_for_other_hosts=dict(left),
        )
