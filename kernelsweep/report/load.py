"""The rows a report reads, typed, and the latest one per series.

A series is one point measured again and again: (kernel, shape, dtype, platform, variant), the
variant being what else sets a point apart (an LNC other than the platform's default, tunables, a
named toolchain), so a search's configurations or two SDKs are never one series. A flow run
re-executed with different bytes keeps both objects under the same row ids (`.attempt-N`); the
re-execution started later, so per row id the latest `started_at` wins.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds

from kernelsweep.bisect.store import SWEEP_PREFIX as BISECT_SWEEPS
from kernelsweep.errors import UsageError
from kernelsweep.platforms import PLATFORMS
from kernelsweep.report.stats import Sample
from kernelsweep.results import reader
from kernelsweep.results.columns import CONFIRMATION, Hotspots, Int32
from kernelsweep.results.schema import INCORRECT
from kernelsweep.sweepspec.shapes import natural_order, shape_order

SeriesKey = tuple[str, str, str, str, str]  # kernel, shape, dtype, platform, variant
LINEAGE = {  # the row's lineage a step can be blamed on, with the name a person reads
    "compiler_version": "compiler",
    "runtime_version": "runtime",
    "profiler_version": "profiler",
    "nki_version": "nki",
    "kernel_source_sha256": "kernel source",
    "instance_type": "instance type",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ReportRow:
    """The columns of one row a report uses (docs/schema.md has them all). Slotted: a comparison
    holds tens of thousands whole, and a per-row `__dict__` was a third of their memory."""

    row_id: str
    sweep: str
    kernel: str
    shape: str
    dtype: str
    platform: str
    lnc: Int32 | None
    status: str
    error_stage: str | None
    error_class: str | None
    error_message: str | None
    is_simulation: bool
    repeats: Int32 | None
    latency_median_us: float | None
    latency_min_us: float | None
    latency_max_us: float | None
    latency_p90_us: float | None
    latency_p99_us: float | None
    latencies_us: list[float] | None
    total_time_us: float | None
    achieved_tflops: float | None
    mfu_percent: float | None
    roofline_percent: float | None
    roofline_us: float | None
    roofline_bound: str | None
    cost_flops: int | None
    cost_hbm_bytes: int | None
    correct: bool | None
    compiler_version: str | None
    runtime_version: str | None
    profiler_version: str | None
    nki_version: str | None
    kernel_source_sha256: str | None
    instance_type: str | None
    flow_run_id: str | None
    started_at: datetime | None
    run_date: date
    tunables: str | None = None  # `tile_m=128,loop_order=mn`; null without tunables (and in older rows)
    toolchain_name: str | None = None
    search_trial: Int32 | None = None
    # schema 3 (issue 25): why slow, against what, at what cost; null in older rows
    bound_engine: str | None = None
    bound_active_percent: float | None = None
    bound_why: str | None = None
    baseline_ref: str | None = None
    baseline_of: str | None = None
    speedup_vs_baseline: float | None = None
    hotspots: Hotspots | None = None
    hotspots_note: str | None = None
    nki_source_uri: str | None = None
    nki_source_sha256: str | None = None
    compile_seconds: float | None = None
    compile_peak_rss_bytes: int | None = None
    compile_cpu_seconds: float | None = None
    iteration_latencies_us: list[float] | None = None

    @property
    def series(self) -> SeriesKey:
        return (self.kernel, self.shape, self.dtype, self.platform, self.variant)

    @property
    def variant(self) -> str:
        """What sets the row's point apart beside its shape, as its point id says it: an LNC other than
        the platform's default, its tunables, its named toolchain ("" for none)."""
        return " ".join(self._variant_parts(toolchain=True))

    @property
    def variant_across_toolchains(self) -> str:
        """The variant without the toolchain: what two SDKs' rows of one point share."""
        return " ".join(self._variant_parts(toolchain=False))

    def _variant_parts(self, toolchain: bool) -> list[str]:
        return variant_parts(self.platform, self.lnc, self.tunables, self.toolchain_name if toolchain else None)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.latency_us is not None

    @property
    def incorrect(self) -> bool:
        return self.status == INCORRECT

    @property
    def shape_order(self) -> tuple[tuple[str, float], ...]:
        return shape_order(self.shape)

    @property
    def latency_us(self) -> float | None:
        return self.latency_median_us if self.latency_median_us is not None else self.total_time_us

    @property
    def order(self) -> tuple[date, datetime]:
        """When the row was measured: its run's date, then its own start."""
        return (self.run_date, self.started_at or _EPOCH)

    def sample(self) -> Sample:
        """The run's samples: the executions the runtime timed in one process when the row has them
        (`capture.iterations`, schema 3), else its repeats: raw (schema 2), else their summary; a row
        from before repeats existed is one repeat of its total time."""
        if self.iteration_latencies_us:
            return Sample.of(self.iteration_latencies_us)
        if self.latency_median_us is None or self.latency_min_us is None or self.latency_max_us is None:
            value = self.latency_us
            if value is None:
                raise ValueError(f"row {self.row_id} has no latency")
            return Sample(n=1, median=value, min=value, max=value, values=(value,))
        return Sample(
            n=self.repeats or 1,
            median=self.latency_median_us,
            min=self.latency_min_us,
            max=self.latency_max_us,
            p90=self.latency_p90_us,
            p99=self.latency_p99_us,
            values=tuple(self.latencies_us or ()),
        )

    @property
    def lineage(self) -> tuple[str | None, ...]:
        """What a run's rows of one point must share to be expected alike."""
        return tuple(getattr(self, column) for column in LINEAGE)


COLUMNS = [f.name for f in fields(ReportRow)]


@dataclass(frozen=True)
class Selection:
    """Which rows a report or comparison looks at; empty means all."""

    kernels: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    sweeps: tuple[str, ...] = ()
    since: date | None = None
    until: date | None = None
    days: int | None = None  # only the last N run dates (UTC), counting today

    def first_date(self, today: date | None = None) -> date | None:
        """The earliest run date selected (`since`, or `days` back from today), None for all."""
        since = self.since
        if self.days is not None:
            if self.days < 1:
                raise UsageError(f"--days {self.days}: give a number of days of 1 or more")
            recent = (today or datetime.now(UTC).date()) - timedelta(days=self.days - 1)
            since = max(since, recent) if since else recent
        return since

    def expression(self, today: date | None = None) -> ds.Expression:
        """The rows' filter; never a confirmation's repeats (`compare --confirm`): they are no run of a point.
        Nor a bisection's runs (sweep bisect-<id>) unless their sweep is named: each is the point under
        another SDK build or kernel commit, not a night of its series."""
        terms = [ds.field("status") != CONFIRMATION] + [
            ds.field(column).isin(list(values))
            for column, values in (
                ("kernel", self.kernels),
                ("platform", self.platforms),
                ("dtype", self.dtypes),
                ("sweep", self.sweeps),
            )
            if values
        ]
        if not self.sweeps:
            sweep = ds.field("sweep")
            terms.append(sweep.is_null() | ~pc.starts_with(sweep, pattern=BISECT_SWEEPS))
        since = self.first_date(today)
        if since:
            terms.append(ds.field("run_date") >= since)
        if self.until:
            terms.append(ds.field("run_date") <= self.until)
        where = terms[0]
        for term in terms[1:]:
            where = where & term
        return where

    def describe(self) -> str:
        parts = [f"{name} {', '.join(values)}" for name, values in self._lists() if values]
        if self.since:
            parts.append(f"since {self.since}")
        if self.until:
            parts.append(f"until {self.until}")
        if self.days:
            parts.append(f"last {self.days} days")
        return "; ".join(parts) or "all rows"

    def _lists(self) -> list[tuple[str, tuple[str, ...]]]:
        return [("kernel", self.kernels), ("platform", self.platforms), ("dtype", self.dtypes), ("sweep", self.sweeps)]


def load(uri: str, selection: Selection | None = None) -> list[ReportRow]:
    """Every selected row, one per row id, oldest first; no rows at all is a usage error."""
    selection = selection or Selection()
    table = reader.read(uri, filters=selection.expression(), columns=COLUMNS)
    newest: dict[str, ReportRow] = {}
    for record in table.to_pylist():
        result = ReportRow(**typed(record))
        kept = newest.get(result.row_id)
        if kept is None or result.order > kept.order:
            newest[result.row_id] = result
    if not newest:
        raise UsageError(f"no results under {uri} ({selection.describe()}); check --results and the filters")
    return sorted(newest.values(), key=lambda r: (r.order, r.series))


def latest(results: list[ReportRow]) -> list[ReportRow]:
    """The newest row of each series, in series order (shapes numerically)."""
    newest: dict[SeriesKey, ReportRow] = {}
    for result in results:
        if result.series not in newest or result.order >= newest[result.series].order:
            newest[result.series] = result
    return [newest[key] for key in sorted(newest, key=natural_order)]


def typed(record: dict[str, Any]) -> dict[str, Any]:
    record["is_simulation"] = bool(record["is_simulation"])
    return record


def variant_parts(platform: str, lnc: int | None, tunables: str | None, toolchain_name: str | None) -> list[str]:
    """A point's variant as its point id says it (kernelsweep.report.index computes it per column too)."""
    known = PLATFORMS.get(platform)
    default = known.default_lnc if known else 1
    parts = [f"lnc={lnc}"] if lnc is not None and lnc != default else []
    parts += [tunables] if tunables else []
    return parts + ([f"toolchain={toolchain_name}"] if toolchain_name else [])
