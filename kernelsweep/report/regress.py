"""Steps in each series over time, and what changed in the rows' lineage where each one happened.

Where: a change-point method over the whole series (each run's level, the log of its median), not
only adjacent pairs: ruptures' PELT with the l2 cost (`KernelCPD` with a linear kernel, its C
implementation), with a penalty scaled by the series' own run-to-run noise, estimated robustly from
successive differences. Apache Otava (MongoDB's E-Divisive line) and MongoDB's
signal-processing-algorithms were the first choice, but neither installs beside this package's
numpy (the first pins numpy 2.2.0 and pulls cloud SDKs, the second needs numpy < 2); ruptures is
maintained and has no other dependency than numpy and scipy. docs/reports.md has the comparison.

Whether it matters: each candidate is judged by the same rule as `compare` (stats.effect and
stats.decide): the runs of the segment before against the runs of the segment after (up to a
window each), the runs as the unit. PELT picks the places where a series moved most, so testing
only those would flatter them: the family correction counts every place a step could have been
(between any two runs of any series), the ones PELT did not propose counting as p = 1. A large
step is flagged the night it happens, with one run on its right; a smaller one once the runs after
it make its interval clear the threshold. It is blamed on the lineage fields that differ between
the last run before it and the first run after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import ruptures

from kernelsweep.report.load import LINEAGE, ReportRow, SeriesKey, natural_order
from kernelsweep.report.stats import Effect, Rule, Spread, Verdict, decide, effect, spread_of

WINDOW_RUNS = 7  # at most this many runs on each side of a step: a week of nightly sweeps
PENALTY = 2.0  # PELT's penalty per change point, in units of the series' noise variance x log(runs)
NOISE_FLOOR = 1e-3  # a noise estimate below 0.1% is taken as 0.1%: no series is that quiet for long
NO_RECORDED_CHANGE = "no recorded change (noise, or the machine)"


@dataclass(frozen=True)
class Step:
    series: SeriesKey
    before: list[ReportRow]  # the runs of the window before the step, oldest first
    after: list[ReportRow]  # the runs of the window after it
    direction: Verdict  # slower or faster
    effect: Effect  # the window after against the window before
    why: str
    adjusted_p: float
    changes: dict[str, tuple[str | None, str | None]]  # lineage label -> (before, after)

    @property
    def first_after(self) -> ReportRow:
        return self.after[0]

    @property
    def last_before(self) -> ReportRow:
        return self.before[-1]

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
    tested: int = 0  # places a step could be (between two runs): what the correction counts


@dataclass(frozen=True)
class _Candidate:
    series: SeriesKey
    before: list[ReportRow]
    after: list[ReportRow]
    effect: Effect


def track(results: list[ReportRow], rule: Rule | None = None, window: int = WINDOW_RUNS) -> list[History]:
    """Every series with its steps, in series order."""
    rule = rule or Rule()
    series = {key: [r for r in rows if r.ok] for key, rows in by_series(results).items()}
    candidates = [c for key, rows in series.items() for c in _candidates(key, rows, rule, window)]
    places = sum(max(0, len(rows) - 1) for rows in series.values())  # every place a step could be
    steps: dict[SeriesKey, list[Step]] = {key: [] for key in series}
    verdicts = decide([c.effect for c in candidates], rule, family=places)
    for c, (decided, why, q) in zip(candidates, verdicts, strict=True):
        if decided in ("slower", "faster"):
            changes = lineage_changes(c.before[-1], c.after[0])
            steps[c.series].append(Step(c.series, c.before, c.after, decided, c.effect, why, q, changes))
    ordered = sorted(series.items(), key=lambda kv: natural_order(kv[0]))
    return [History(key, rows, steps[key], max(0, len(rows) - 1)) for key, rows in ordered]


def change_points(levels: np.ndarray) -> list[int]:
    """Indices where a new segment starts, from PELT over the levels with a noise-scaled penalty."""
    if len(levels) < 2:
        return []
    noise = max(NOISE_FLOOR, 1.4826 * float(np.median(np.abs(np.diff(levels)))) / math.sqrt(2))
    penalty = PENALTY * noise**2 * math.log(len(levels))
    found = ruptures.KernelCPD(kernel="linear", min_size=1).fit(levels).predict(pen=penalty)
    return [int(i) for i in found[:-1]]  # the last "break" is the series' end


def _candidates(key: SeriesKey, rows: list[ReportRow], rule: Rule, window: int) -> list[_Candidate]:
    """Each change point PELT proposes, with the runs of its segments either side (up to a window)."""
    cuts = change_points(np.array([r.sample().level for r in rows]))
    bounds = [0, *cuts, len(rows)]
    return [
        candidate(
            key, rows, rows[max(bounds[i - 1], cut - window) : cut], rows[cut : min(bounds[i + 1], cut + window)], rule
        )
        for i, cut in enumerate(cuts, start=1)
    ]


def candidate(
    key: SeriesKey, rows: list[ReportRow], before: list[ReportRow], after: list[ReportRow], rule: Rule
) -> _Candidate:
    """The runs after a place against the runs before it, the series' other runs as history."""
    spread = _rest(rows, before + after)
    found = effect(
        [r.sample() for r in before],
        [r.sample() for r in after],
        threshold=rule.threshold_for(key[0]),
        alpha=rule.alpha,
        spread_a=spread,
        spread_b=spread,
    )
    return _Candidate(key, before, after, found)


def _rest(rows: list[ReportRow], used: list[ReportRow]) -> Spread:
    """The run-to-run spread of the series' other runs, grouped by lineage."""
    ids = {r.row_id for r in used}
    groups: dict[tuple[str | None, ...], list[float]] = {}
    for r in rows:
        if r.row_id not in ids:
            groups.setdefault(r.lineage, []).append(r.sample().level)
    return spread_of(groups.values(), "the series' other runs")


def regressions(histories: list[History]) -> list[Step]:
    """Every step that made a series slower, newest first."""
    steps = [s for h in histories for s in h.steps if s.direction == "slower"]
    return sorted(steps, key=lambda s: (s.first_after.order, natural_order(s.series)), reverse=True)


def lineage_changes(before: ReportRow, after: ReportRow) -> dict[str, tuple[str | None, str | None]]:
    return {
        label: (getattr(before, column), getattr(after, column))
        for column, label in LINEAGE.items()
        if getattr(before, column) != getattr(after, column)
    }


def by_series(results: list[ReportRow]) -> dict[SeriesKey, list[ReportRow]]:
    """Each series' rows, oldest first."""
    grouped: dict[SeriesKey, list[ReportRow]] = {}
    for result in sorted(results, key=lambda r: r.order):
        grouped.setdefault(result.series, []).append(result)
    return grouped
