"""Verdicts: the change B / A at each point with a confidence interval, judged against a threshold
that matters, with a family correction over every point a comparison tests.

The change is estimated on log latencies, so it is a ratio. Which interval depends on what the
runs can show (docs/reports.md, "The statistics"):

* The unit of replication is the run. A run's level is the median of its repeats; runs of one point
  differ by more than their repeats show (another boot, core, host), so when the point's run-to-run
  spread is known (its sides hold several runs, or the series has other runs: its history) the
  interval is Student's t on the runs' levels: mean of B's levels - mean of A's, with the spread
  pooled from the sides, the history and the prior the sweep's other points lend (prior.py). The
  levels already carry the repeats' noise, so the repeats' own rank test adds no floor: a floor at
  1 / C(2n, n) would make a lone change among hundreds of points impossible to call at any size.
* Without any run-to-run estimate (a point's first two runs, too few points to lend one) the interval is the exact
  Hodges-Lehmann interval of the two runs' repeats, and the verdict says the run-to-run noise is
  unknown: one run a side cannot tell a run's shift from a change.
* Rows written before schema 2 have no raw repeats: the bound their summaries prove stands in.

The rule: with threshold t (default 2%) and level alpha (default 0.05), the interval is the
two-sided 1 - 2 alpha interval (90%), so each directional claim is a one-sided test at alpha:
`slower` when it lies above +t and that survives the family correction (Benjamini-Hochberg by
default, Holm on request) over the points tested; `faster` below -t likewise; `same` only when it
lies inside +-t (equivalence, TOST at alpha); `inconclusive` otherwise, with the reason. An
inconclusive point whose own one-sided test passes uncorrected is a suspect (`suspected`): the one
thing more runs must settle, and what compare's exit 3 means.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import stdtr, stdtrit

from kernelsweep.report import ranks

Verdict = Literal["faster", "slower", "same", "inconclusive"]
Correction = Literal["bh", "holm"]
DEFAULT_ALPHA = 0.05
DEFAULT_THRESHOLD = 0.02
TINY = 1e-12  # runs that agree to the last bit still leave the interval a width
CORRECTION_NAMES = {"bh": "Benjamini-Hochberg", "holm": "Holm"}


@dataclass(frozen=True)
class Sample:
    """One run of a point: its repeats (latencies in microseconds), raw when the row kept them."""

    n: int
    median: float
    min: float
    max: float
    p90: float | None = None
    p99: float | None = None
    values: tuple[float, ...] = ()

    @property
    def raw(self) -> bool:
        return self.n > 0 and len(self.values) == self.n

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        """A run's raw samples, summarised as a row summarises its repeats."""
        ordered = np.sort(np.asarray(values, dtype=float))
        return cls(
            n=len(ordered),
            median=float(np.median(ordered)),
            min=float(ordered[0]),
            max=float(ordered[-1]),
            p90=float(np.percentile(ordered, 90)),
            p99=float(np.percentile(ordered, 99)),
            values=tuple(float(v) for v in values),
        )

    @property
    def level(self) -> float:
        """The run's level on the log scale: the log of its median."""
        return math.log(self.median)

    def summary(self) -> ranks.Sample5:
        return ranks.Sample5(self.n, self.median, self.min, self.max, self.p90, self.p99)


@dataclass(frozen=True)
class Spread:
    """How much one run's level (log median) varies from run to run at a point: a sum of squared
    deviations and its degrees of freedom, from runs known to be alike (`source` says which)."""

    ss: float = 0.0
    df: float = 0  # fractional when a prior lends some (prior.py)
    source: str = "none"

    def __add__(self, other: Spread) -> Spread:
        sources = [s for s in (self.source, other.source) if s != "none"]
        return Spread(self.ss + other.ss, self.df + other.df, " and ".join(sources) or "none")

    @property
    def variance(self) -> float:
        return self.ss / self.df if self.df else math.nan


def spread_of(groups: Iterable[Sequence[float] | np.ndarray], source: str) -> Spread:
    """The pooled within-group spread of run levels; groups are runs expected alike (one lineage)."""
    ss, df = 0.0, 0
    for levels in groups:
        if len(levels) > 1:
            ss += float(np.sum((np.asarray(levels) - np.mean(levels)) ** 2))
            df += len(levels) - 1
    return Spread(ss, df, source if df else "none")


@dataclass(frozen=True)
class Effect:
    """B against A at one point: the ratio B / A, its interval, and the tests behind the verdict."""

    ratio: float
    low: float  # the ratio's interval at 1 - 2 alpha
    high: float
    p_value: float  # two-sided: any change at all
    p_above: float  # one-sided: B slower than A by more than the threshold
    p_below: float  # one-sided: B faster than A by more than the threshold
    method: str  # how the interval was made, in words
    runs: tuple[int, int]  # runs on each side
    repeats: tuple[int, int]  # repeats of each side's newest run
    threshold: float = DEFAULT_THRESHOLD
    se: float = math.nan  # standard error of the log ratio, where the method has one

    @property
    def change(self) -> float:
        return self.ratio - 1

    @property
    def p_beyond(self) -> float:
        """The p-value of the claim the estimate points to (slower or faster beyond the threshold)."""
        return min(self.p_above, self.p_below)

    @property
    def direction(self) -> Verdict:
        return "slower" if self.p_above <= self.p_below else "faster"


def ratio_of(log_ratio: float) -> float:
    """exp, with an unbounded end of an interval (a level no data can reach) as infinity."""
    return math.exp(log_ratio) if log_ratio < 700 else math.inf


def margins(threshold: float) -> tuple[float, float]:
    """The threshold's margins on the log scale: ratios below 1 - t are faster, above 1 + t slower."""
    return math.log(1 - threshold), math.log(1 + threshold)


def effect(
    a: Sequence[Sample],
    b: Sequence[Sample],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    spread_a: Spread | None = None,
    spread_b: Spread | None = None,
) -> Effect:
    """Each side is one run, or several runs of the point. `spread_a` / `spread_b` are the run-to-run
    spreads of the sides' series from their other runs; the same object when both sides are one series."""
    down, up = margins(threshold)
    spread_a, spread_b = spread_a or Spread(), spread_b or Spread()
    runs, repeats = (len(a), len(b)), (a[0].n, b[0].n)
    own_a, own_b = spread_of([[s.level for s in a]], "runs compared"), spread_of([[s.level for s in b]], "")
    if spread_a is spread_b:
        pooled = own_a + own_b + spread_a
        per_side = (pooled, pooled) if pooled.df else None
    else:
        both = (own_a + spread_a, own_b + spread_b)
        per_side = both if both[0].df and both[1].df else None
    if per_side is None:
        assert runs == (1, 1), "several runs on a side always give a spread"
        rank = _rank_shift(a[0], b[0], alpha, down, up)
        method = "exact rank interval of the repeats" if a[0].raw and b[0].raw else "bound from the rows' summaries"
        return _from_rank(rank, f"{method}; run-to-run noise unknown", runs, repeats, threshold)
    levels = statistics.fmean(s.level for s in b) - statistics.fmean(s.level for s in a)
    se, df = _welch(per_side[0], per_side[1], len(a), len(b), pooled=per_side[0] is per_side[1])
    source = per_side[0].source if per_side[0] is per_side[1] else f"{per_side[0].source}; {per_side[1].source}"
    method = f"t on run levels, run-to-run spread from {source} ({df:.0f} df)"
    return t_effect(levels, se, df, alpha, threshold, method, runs, repeats)


def t_effect(
    centre: float,
    se: float,
    df: float,
    alpha: float,
    threshold: float,
    method: str,
    runs: tuple[int, int],
    repeats: tuple[int, int],
) -> Effect:
    """The change exp(centre) with Student's t interval at 1 - 2 alpha and its tests against the threshold."""
    down, up = margins(threshold)
    t = float(stdtrit(df, 1 - alpha))
    return Effect(
        ratio=ratio_of(centre),
        low=ratio_of(centre - t * se),
        high=ratio_of(centre + t * se),
        p_value=float(2 * stdtr(df, -abs(centre) / se)),
        p_above=float(stdtr(df, -(centre - up) / se)),
        p_below=float(stdtr(df, (centre - down) / se)),
        method=method,
        runs=runs,
        repeats=repeats,
        threshold=threshold,
        se=se,
    )


def _rank_shift(a: Sample, b: Sample, alpha: float, down: float, up: float) -> ranks.RankShift:
    if a.raw and b.raw:
        return ranks.exact_interval(np.asarray(a.values), np.asarray(b.values), alpha, down, up)
    return ranks.bounded(a.summary(), b.summary(), alpha, down, up)


def _from_rank(
    rank: ranks.RankShift, method: str, runs: tuple[int, int], repeats: tuple[int, int], threshold: float
) -> Effect:
    return Effect(
        ratio=ratio_of(rank.shift),
        low=ratio_of(rank.low),
        high=ratio_of(rank.high),
        p_value=rank.p_value,
        p_above=rank.p_above,
        p_below=rank.p_below,
        method=method,
        runs=runs,
        repeats=repeats,
        threshold=threshold,
    )


def _welch(a: Spread, b: Spread, runs_a: int, runs_b: int, pooled: bool) -> tuple[float, float]:
    """(standard error of the difference of the sides' mean levels, its degrees of freedom)."""
    if pooled:
        return max(TINY, math.sqrt(a.variance * (1 / runs_a + 1 / runs_b))), float(a.df)
    va, vb = max(TINY, a.variance) / runs_a, max(TINY, b.variance) / runs_b
    return math.sqrt(va + vb), (va + vb) ** 2 / (va**2 / a.df + vb**2 / b.df)


def adjusted(p_values: Sequence[float], correction: Correction, family: int | None = None) -> list[float]:
    """Adjusted p-values: significant when <= alpha. BH keeps the expected share of false calls among
    the calls <= alpha; Holm keeps the chance of any false call <= alpha. `family` counts tests whose
    p-values are not given (hypotheses screened out before testing count as p = 1)."""
    given = len(p_values)
    p_values = [*p_values, *[1.0] * (max(given, family or 0) - given)]
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    if correction == "holm":
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p_values[i]))
            out[i] = running
        return out[:given]
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, p_values[i] * m / (rank + 1))
        out[i] = min(1.0, running)
    return out[:given]


@dataclass(frozen=True)
class Rule:
    """What a verdict needs: the change that matters (per kernel if set), the error level, the
    family correction."""

    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    correction: Correction = "bh"
    per_kernel: tuple[tuple[str, float], ...] = ()

    def threshold_for(self, kernel: str) -> float:
        return dict(self.per_kernel).get(kernel, self.threshold)

    def describe(self, tested: int, what: str = "point(s) tested") -> str:
        kernels = "".join(f", {k} +-{t:.1%}" for k, t in self.per_kernel)
        return (
            f"threshold +-{self.threshold:.1%}{kernels}; {1 - 2 * self.alpha:.0%} intervals; "
            f"{CORRECTION_NAMES[self.correction]} at {self.alpha:g} over {tested} {what}"
        )


def decide(effects: Sequence[Effect], rule: Rule, family: int | None = None) -> list[tuple[Verdict, str, float]]:
    """(verdict, why, adjusted p) for one family: a comparison's points, or a report's candidate steps
    (then `family` is every place a step could have been, not only the candidates tested)."""
    tested = max(len(effects), family or 0)
    adjusted_p = adjusted([e.p_beyond for e in effects], rule.correction, tested)
    return [(*_verdict(e, q, rule, tested), q) for e, q in zip(effects, adjusted_p, strict=True)]


SCREEN_ALPHA = 0.05  # the screen's level: what makes an undecided point a suspect, whatever the rule's alpha


def suspected(e: Effect, alpha: float) -> bool:
    """Whether a point the family did not call slower still leans there on its own: its one-sided test
    beyond +threshold passes uncorrected (at the rule's alpha or the screen's, the looser), or its
    interval is unbounded. A suspect is what confirmation (more runs of A and B) must settle."""
    unbounded = not (math.isfinite(e.low) and math.isfinite(e.high))
    return unbounded or e.p_above <= max(alpha, SCREEN_ALPHA)


def interval(e: Effect) -> str:
    return f"{e.change:+.1%} [{e.low - 1:+.1%}, {e.high - 1:+.1%}]"


def _verdict(e: Effect, q: float, rule: Rule, tested: int) -> tuple[Verdict, str]:
    t, shown = e.threshold, interval(e)
    name = CORRECTION_NAMES[rule.correction]
    if q <= rule.alpha:
        side = f"above +{t:.0%}" if e.direction == "slower" else f"below -{t:.0%}"
        return e.direction, f"{shown} lies {side}; {name} p={q:.2g} over {tested}"
    if 1 - t <= e.low and e.high <= 1 + t:
        return "same", f"{shown} lies within +-{t:.0%}"
    if not (math.isfinite(e.low) and math.isfinite(e.high)):
        return "inconclusive", f"{e.repeats[0]} v {e.repeats[1]} repeats cannot bound the change: more repeats"
    if e.low > 1 + t or e.high < 1 - t:
        return "inconclusive", f"{shown} lies beyond +-{t:.0%} but not after {name} over {tested} (p={q:.2g})"
    crossed = [f"{sign}{t:.0%}" for sign, edge in (("-", 1 - t), ("+", 1 + t)) if e.low < edge < e.high]
    return "inconclusive", f"{shown} crosses {' and '.join(crossed)}: more repeats or runs narrow it"
