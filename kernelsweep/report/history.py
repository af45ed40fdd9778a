"""A point's run-to-run noise, learned from the series' own other runs (its history).

One run a side cannot show how much whole runs differ; the series' earlier (or later) nights can.
Runs are grouped by lineage (compiler, runtime, profiler, NKI, kernel source, instance type), so a
step that came with a tool change is not taken for noise; within each group the spread of the runs'
levels (log medians) is pooled (`stats.spread_of`). The newest `HISTORY_RUNS` runs of a series count.
"""

from __future__ import annotations

from collections import defaultdict

from kernelsweep.report.load import ReportRow, SeriesKey
from kernelsweep.report.stats import Spread, spread_of

HISTORY_RUNS = 30  # about a month of nightly runs: recent enough to describe today's machines


class Spreads:
    """The run-to-run spread of every series in `results`, leaving out the rows being compared."""

    def __init__(self, results: list[ReportRow], used: set[str]) -> None:
        self._rows: dict[SeriesKey, list[ReportRow]] = defaultdict(list)
        for r in results:
            if r.ok and r.row_id not in used and r.latency_median_us:
                self._rows[r.series].append(r)
        self._known: dict[SeriesKey, Spread] = {}

    def of(self, series: SeriesKey) -> Spread:
        """The same object for the same series, so two sides of one series pool it (stats.effect)."""
        if series not in self._known:
            self._known[series] = _spread(self._rows.get(series, []))
        return self._known[series]


def _spread(rows: list[ReportRow]) -> Spread:
    newest = sorted(rows, key=lambda r: r.order)[-HISTORY_RUNS:]
    groups: dict[tuple[str | None, ...], list[float]] = defaultdict(list)
    for r in newest:
        groups[r.lineage].append(r.sample().level)
    return spread_of(groups.values(), f"{len(newest)} other run(s) of the series")
