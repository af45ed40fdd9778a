"""What reports and comparisons ask of the results, so that a year of nights need not be in memory.

A report's statistics need, per series, every successful run's level (the log of its median) and
lineage, but the whole row (raw repeats, errors, rates) only of a few: each series' latest run, the
runs either side of a step, the two sides of a comparison. `Results` is that contract. `InMemory`
answers it from `ReportRow`s (tests, small datasets); `kernelsweep.report.index.Indexed` from a few
columns of the dataset, fetching whole rows only for the row ids asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from kernelsweep.report.load import ReportRow, SeriesKey, latest
from kernelsweep.sweepspec.shapes import natural_order

SIDE_RUNS = 30  # a comparison side pools at most a point's newest runs with that version (a month of nights)


@dataclass(frozen=True)
class SeriesRuns:
    """One series' successful runs, oldest first, as columns: what change points and spreads use."""

    key: SeriesKey
    row_ids: Sequence[str]
    levels: np.ndarray  # log of each run's median latency
    lineage: np.ndarray  # one integer per distinct lineage (compiler, runtime, ...): runs expected alike
    has_median: np.ndarray  # the row has its repeats' median (rows before repeats have only a total time)
    source: Results = field(compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.row_ids)

    def rows(self, start: int = 0, stop: int | None = None) -> list[ReportRow]:
        """The whole rows of runs start..stop (fetched if need be)."""
        return self.source.rows(self.row_ids[start:stop])


class Results(Protocol):
    def latest(self) -> list[ReportRow]:
        """The newest row of each series, in series order."""

    def series(self) -> dict[SeriesKey, SeriesRuns]:
        """Every series (even one without a successful run), in series order."""

    def rows(self, row_ids: Sequence[str]) -> list[ReportRow]:
        """The whole rows, in the order asked for."""

    def kernels(self) -> list[str]: ...

    def values(self, column: str) -> list[str]:
        """The distinct non-empty values of a text column (tool versions), sorted."""

    def runs_newest_first(self) -> list[str]:
        """Flow run ids, the most recently started first (by their first row)."""

    def select(self, column: str, keep: Callable[[str | None], bool], newest: int | None = None) -> list[ReportRow]:
        """Rows whose `column` passes `keep`, newest first; with `newest`, at most that many per series."""


def as_results(results: Results | list[ReportRow]) -> Results:
    return InMemory(results) if isinstance(results, list) else results


class InMemory:
    """`Results` over rows already loaded (`kernelsweep.report.load.load`)."""

    def __init__(self, rows: list[ReportRow]) -> None:
        self._rows = sorted(rows, key=lambda r: r.order)  # stable: ties keep the loaded order
        self._by_id = {r.row_id: r for r in rows}

    def latest(self) -> list[ReportRow]:
        return latest(self._rows)

    def series(self) -> dict[SeriesKey, SeriesRuns]:
        grouped: dict[SeriesKey, list[ReportRow]] = {}
        for r in self._rows:
            grouped.setdefault(r.series, [])
            if r.ok:
                grouped[r.series].append(r)
        codes: dict[tuple[str | None, ...], int] = {}
        out = {}
        for key in sorted(grouped, key=natural_order):
            runs = grouped[key]
            levels = np.array([r.sample().level for r in runs], dtype=float)
            lineage = np.array([codes.setdefault(r.lineage, len(codes)) for r in runs], dtype=np.int64)
            has_median = np.array([bool(r.latency_median_us) for r in runs], dtype=bool)
            out[key] = SeriesRuns(key, [r.row_id for r in runs], levels, lineage, has_median, self)
        return out

    def rows(self, row_ids: Sequence[str]) -> list[ReportRow]:
        return [self._by_id[i] for i in row_ids]

    def kernels(self) -> list[str]:
        return sorted({r.kernel for r in self._rows})

    def values(self, column: str) -> list[str]:
        return sorted({v for r in self._rows if (v := getattr(r, column))})

    def runs_newest_first(self) -> list[str]:
        started: dict[str, tuple] = {}
        for r in self._rows:
            if r.flow_run_id and (r.flow_run_id not in started or r.order < started[r.flow_run_id]):
                started[r.flow_run_id] = r.order
        return sorted(started, key=lambda run: started[run], reverse=True)

    def select(self, column: str, keep: Callable[[str | None], bool], newest: int | None = None) -> list[ReportRow]:
        chosen: list[ReportRow] = []
        per_series: dict[SeriesKey, int] = {}
        for r in sorted(self._rows, key=lambda r: r.order, reverse=True):
            if keep(getattr(r, column)) and (newest is None or per_series.get(r.series, 0) < newest):
                per_series[r.series] = per_series.get(r.series, 0) + 1
                chosen.append(r)
        return chosen
