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

from kernelsweep.report.load import LINEAGE, ReportRow, SeriesKey
from kernelsweep.report.series_query import Results, SeriesRuns, as_results
from kernelsweep.report.stats import Effect, Rule, Spread, Verdict, decide, effect, spread_of
from kernelsweep.sweepspec.shapes import natural_order

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
    runs: SeriesRuns  # the series' successful runs, oldest first (levels and lineage; rows on demand)
    steps: list[Step]
    tested: int = 0  # places a step could be (between two runs): what the correction counts

    @property
    def rows(self) -> list[ReportRow]:
        """The series' successful rows, oldest first (fetched whole: for a chart of one series)."""
        return self.runs.rows()


@dataclass(frozen=True)
class _Candidate:
    series: SeriesKey
    before: list[ReportRow]
    after: list[ReportRow]
    effect: Effect


def track(
    results: Results | list[ReportRow], rule: Rule | None = None, window: int = WINDOW_RUNS, scan: bool = False
) -> list[History]:
    """Every series with its steps, in series order. Only the runs either side of a proposed step are
    fetched whole; the rest of each series is its levels and lineage. `scan` tests every place, a full
    window each side, instead of PELT's (the alternative benchmarks/steps.py --scan measures)."""
    rule, source = rule or Rule(), as_results(results)
    series = source.series()
    places = {key: _places(len(runs), runs.levels, window, scan) for key, runs in series.items()}
    wanted = [runs.row_ids[i] for key, runs in series.items() for _, (lo, hi) in places.get(key, [])
              for i in range(lo, hi)]  # fmt: skip
    fetched = {r.row_id: r for r in source.rows(list(dict.fromkeys(wanted)))}
    candidates = [
        _candidate_at(runs, lo, cut, hi, fetched, rule)
        for key, runs in series.items()
        for cut, (lo, hi) in places.get(key, [])
    ]
    total = sum(max(0, len(runs) - 1) for runs in series.values())  # every place a step could be
    steps: dict[SeriesKey, list[Step]] = {key: [] for key in series}
    verdicts = decide([c.effect for c in candidates], rule, family=total)
    for c, (decided, why, q) in zip(candidates, verdicts, strict=True):
        if decided in ("slower", "faster"):
            changes = lineage_changes(c.before[-1], c.after[0])
            steps[c.series].append(Step(c.series, c.before, c.after, decided, c.effect, why, q, changes))
    return [History(key, runs, steps[key], max(0, len(runs) - 1)) for key, runs in series.items()]


def _places(count: int, levels: np.ndarray, window: int, scan: bool) -> list[tuple[int, tuple[int, int]]]:
    """(place, (first run, end)) of each candidate step of a series: PELT's cuts within their segments."""
    if scan:
        return [(t, (max(0, t - window), min(count, t + window))) for t in range(1, count)]
    cuts = change_points(levels)
    return [(cut, _window(count, cuts, i, cut, window)) for i, cut in enumerate(cuts, start=1)]


def _window(count: int, cuts: list[int], i: int, cut: int, window: int) -> tuple[int, int]:
    """The runs either side of the `i`th cut (up to a window each), within its segments."""
    bounds = [0, *cuts, count]
    return max(bounds[i - 1], cut - window), min(bounds[i + 1], cut + window)


def change_points(levels: np.ndarray) -> list[int]:
    """Indices where a new segment starts, from PELT over the levels with a noise-scaled penalty."""
    if len(levels) < 2:
        return []
    noise = max(NOISE_FLOOR, 1.4826 * float(np.median(np.abs(np.diff(levels)))) / math.sqrt(2))
    penalty = PENALTY * noise**2 * math.log(len(levels))
    import ruptures  # here, not above: its scipy.stats costs every `compare` and `report --help` ~0.6 CPU-s

    found = ruptures.KernelCPD(kernel="linear", min_size=1).fit(levels).predict(pen=penalty)
    return [int(i) for i in found[:-1]]  # the last "break" is the series' end


def _candidate_at(
    runs: SeriesRuns, lo: int, cut: int, hi: int, fetched: dict[str, ReportRow], rule: Rule
) -> _Candidate:
    """The runs after a place against the runs before it, the series' other runs as history."""
    before = [fetched[i] for i in runs.row_ids[lo:cut]]
    after = [fetched[i] for i in runs.row_ids[cut:hi]]
    return _judged(runs, before, after, _rest(runs, (lo, hi)), rule)


def _judged(
    runs: SeriesRuns, before: list[ReportRow], after: list[ReportRow], spread: Spread, rule: Rule
) -> _Candidate:
    """The runs after against the runs before, `spread` the run-to-run noise of the series' others."""
    found = effect(
        [r.sample() for r in before],
        [r.sample() for r in after],
        threshold=rule.threshold_for(runs.key[0]),
        alpha=rule.alpha,
        spread_a=spread,
        spread_b=spread,
    )
    return _Candidate(runs.key, before, after, found)


def _rest(runs: SeriesRuns, *spans: tuple[int, int]) -> Spread:
    """The run-to-run spread of the series' other runs (outside each lo..hi), grouped by lineage."""
    keep = np.ones(len(runs), dtype=bool)
    for lo, hi in spans:
        keep[lo:hi] = False
    return spread_of(levels_by_lineage(runs.levels[keep], runs.lineage[keep]), "the series' other runs")


def levels_by_lineage(levels: np.ndarray, lineage: np.ndarray) -> list[np.ndarray]:
    """The levels of each group of runs expected alike, in order of first appearance: one lineage and
    one segment between change points, so a step (with or without a lineage change) is never taken
    for run-to-run noise; pooled over it, a +10% step made the noise 4.9% and the step vanished."""
    segment = np.zeros(len(levels), dtype=int)
    for cut in change_points(levels):
        segment[cut:] += 1
    groups: dict[tuple[int, int], list[int]] = {}
    for index, key in enumerate(zip(lineage.tolist(), segment.tolist(), strict=True)):
        groups.setdefault(key, []).append(index)
    return [levels[indices] for indices in groups.values()]


def drifts(histories: list[History], rule: Rule | None = None, window: int = WINDOW_RUNS) -> list[Step]:
    """Series that got slower by a drift no single step shows: the newest `window` runs against the
    first `window` of the selection (its start, `--since` or `--days`, fixes the reference), judged by
    the same rule with the series judged as the family. PELT cuts a slow drift into steps each too
    small to pass, and each is judged only against its neighbour; the reference does not move. Series
    with a slower step already in the report are left to it."""
    rule = rule or Rule()
    judged = [h for h in histories if len(h.runs) >= 2 * window and not any(s.direction == "slower" for s in h.steps)]
    if judged:  # every series' rows in one scan: two scans per series re-read the same nights' files each time
        wanted = [i for h in judged for i in (*h.runs.row_ids[:window], *h.runs.row_ids[len(h.runs) - window :])]
        judged[0].runs.source.rows(wanted)
    candidates = []
    for h in judged:
        runs, newest = h.runs, len(h.runs) - window
        spread = _rest(runs, (0, window), (newest, len(runs)))
        candidates.append(_judged(runs, runs.rows(0, window), runs.rows(newest), spread, rule))
    out = []
    for c, (decided, why, q) in zip(candidates, decide([c.effect for c in candidates], rule), strict=True):
        if decided == "slower":
            out.append(
                Step(c.series, c.before, c.after, decided, c.effect, why, q, lineage_changes(c.before[-1], c.after[0]))
            )
    return out


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
