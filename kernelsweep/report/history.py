"""A point's run-to-run noise, learned from the series' own other runs (its history).

One run a side cannot show how much whole runs differ; the series' earlier (or later) nights can.
Runs are grouped by lineage (compiler, runtime, profiler, NKI, kernel source, instance type), so a
step that came with a tool change is not taken for noise; within each group the spread of the runs'
levels (log medians) is pooled (`stats.spread_of`). The newest `HISTORY_RUNS` runs of a series count.
"""

from __future__ import annotations

import numpy as np

from kernelsweep.report.load import ReportRow, SeriesKey
from kernelsweep.report.regress import levels_by_lineage
from kernelsweep.report.series_query import Results, SeriesRuns, as_results
from kernelsweep.report.stats import Spread, spread_of

HISTORY_RUNS = 30  # about a month of nightly runs: recent enough to describe today's machines


class Spreads:
    """The run-to-run spread of every series in `results`, leaving out the rows being compared."""

    def __init__(self, results: Results | list[ReportRow], used: set[str]) -> None:
        self._series = as_results(results).series()
        self._used = used
        self._known: dict[SeriesKey, Spread] = {}

    def of(self, series: SeriesKey) -> Spread:
        """The same object for the same series, so two sides of one series pool it (stats.effect)."""
        if series not in self._known:
            runs = self._series.get(series)
            self._known[series] = _spread(runs, self._used) if runs is not None else spread_of([], "")
        return self._known[series]


def _spread(runs: SeriesRuns, used: set[str]) -> Spread:
    keep = np.array([has and row_id not in used for has, row_id in zip(runs.has_median, runs.row_ids, strict=True)],
                    dtype=bool)  # fmt: skip
    newest = np.flatnonzero(keep)[-HISTORY_RUNS:]
    groups = levels_by_lineage(runs.levels[newest], runs.lineage[newest])
    return spread_of(groups, f"{len(newest)} other run(s) of the series")
