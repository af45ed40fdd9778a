"""Steps in each series over time, and what changed in the rows' lineage where each one happened.

Between every two consecutive runs of a series, the runs before (up to a window) are tested against
the runs from there on (up to a window) with the same rule as `compare`: the exact rank test on the
pooled repeats' summaries, Holm over one night's candidates (all series whose run that night starts
the right-hand side), and the noise floor, which here also covers the run-to-run spread of each
window. A step is flagged the night it happens, with one run on its right; later runs only firm it
up. Near a real step the shifted windows look significant too, so of flagged candidates in the same
direction within a window only the most significant stays. The step is blamed on the lineage
fields that differ between the last run before it and the first run after it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date

from kernelsweep.report.load import LINEAGE, ReportRow, SeriesKey
from kernelsweep.report.stats import DEFAULT_ALPHA, Shift, Verdict, pool, shift, verdicts

WINDOW_RUNS = 7  # runs on each side of a candidate step: a week of nightly sweeps
NO_RECORDED_CHANGE = "no recorded change (noise, or the machine)"


@dataclass(frozen=True)
class Step:
    series: SeriesKey
    before: ReportRow  # the last run before the step
    after: ReportRow  # the first run after it
    direction: Verdict  # slower or faster
    shift: Shift  # the window after against the window before
    why: str
    changes: dict[str, tuple[str | None, str | None]]  # lineage label -> (before, after)

    @property
    def cause(self) -> str:
        if not self.changes:
            return NO_RECORDED_CHANGE
        return "; ".join(f"{label} {old or '-'} -> {new or '-'}" for label, (old, new) in self.changes.items())


@dataclass(frozen=True)
class History:
    series: SeriesKey
    rows: list[ReportRow]  # the series' successful rows, oldest first
    steps: list[Step]


@dataclass(frozen=True)
class _Candidate:
    series: SeriesKey
    index: int  # the first run of the right-hand window
    night: date
    shift: Shift


def track(results: list[ReportRow], alpha: float = DEFAULT_ALPHA, window: int = WINDOW_RUNS) -> list[History]:
    """Every series with its steps, in series order."""
    series = {key: [r for r in rows if r.ok] for key, rows in by_series(results).items()}
    candidates = [
        _Candidate(key, t, rows[t].run_date, _shift(rows, t, window))
        for key, rows in series.items()
        for t in range(1, len(rows))
    ]
    nights: dict[date, list[_Candidate]] = defaultdict(list)
    for candidate in candidates:
        nights[candidate.night].append(candidate)
    flagged: dict[SeriesKey, list[tuple[_Candidate, Verdict, str]]] = defaultdict(list)
    for family in nights.values():
        for candidate, (decided, why) in zip(family, verdicts([c.shift for c in family], alpha), strict=True):
            if decided in ("slower", "faster"):
                flagged[candidate.series].append((candidate, decided, why))
    return [History(key, rows, _steps(rows, flagged[key], window)) for key, rows in sorted(series.items())]


def regressions(histories: list[History]) -> list[Step]:
    """Every step that made a series slower, newest first."""
    steps = [s for h in histories for s in h.steps if s.direction == "slower"]
    return sorted(steps, key=lambda s: (s.after.order, s.series), reverse=True)


def lineage_changes(before: ReportRow, after: ReportRow) -> dict[str, tuple[str | None, str | None]]:
    return {
        label: (getattr(before, column), getattr(after, column))
        for column, label in LINEAGE.items()
        if getattr(before, column) != getattr(after, column)
    }


def _shift(rows: list[ReportRow], t: int, window: int) -> Shift:
    """The window from run t on against the window before it, each pooled nearest run first."""
    before = pool(r.sample() for r in reversed(rows[max(0, t - window) : t]))
    return shift(before, pool(r.sample() for r in rows[t : t + window]))


def _steps(rows: list[ReportRow], flagged: list[tuple[_Candidate, Verdict, str]], window: int) -> list[Step]:
    """The most significant of flagged candidates that lie within a window of each other in one direction."""
    kept: list[tuple[_Candidate, Verdict, str]] = []
    for candidate, direction, why in sorted(flagged, key=lambda f: (f[0].shift.p_value, -abs(f[0].shift.change))):
        if all(d != direction or abs(c.index - candidate.index) >= window for c, d, _ in kept):
            kept.append((candidate, direction, why))
    steps = []
    for candidate, direction, why in sorted(kept, key=lambda k: k[0].index):
        before, after = rows[candidate.index - 1], rows[candidate.index]
        steps.append(Step(after.series, before, after, direction, candidate.shift, why, lineage_changes(before, after)))
    return steps


def by_series(results: list[ReportRow]) -> dict[SeriesKey, list[ReportRow]]:
    """Each series' rows, oldest first."""
    grouped: dict[SeriesKey, list[ReportRow]] = {}
    for result in sorted(results, key=lambda r: r.order):
        grouped.setdefault(result.series, []).append(result)
    return grouped
