"""Verdicts from the repeats' summaries: an exact rank test, a noise floor, and Holm over a family.

A row keeps only a summary of its repeats (count, median, min, max, p90, p99), not the latencies.
That still proves something about ranks: each summary value sits at a known position among its
sorted repeats (numpy's linear interpolation), so it bounds the repeats on either side of it. Across
two sides (one row each, or several runs of the same point pooled) we count the (a, b) pairs that
are *certainly* ordered b > a. That count is a lower bound on the Mann-Whitney U statistic, and if
nothing changed (every repeat an independent draw from one continuous distribution) every order of
the pooled repeats is equally likely, so P(U >= bound) is an exact, distribution-free p-value. It is
conservative (the true U may be higher) and its floor is 2 / C(m + n, m) two-sided: 3 repeats a side
can never reach 0.05; 7 a side reach 0.0006.

Significance alone would call a 0.2% shift on a quiet machine "slower"; so faster or slower also
needs the levels to have moved further than the noise either side shows, within a run (the repeats'
`(max - min) / median`) or from run to run (pooled sides): a floor each point sets from its own
measurements, not one global threshold. docs/reports.md has the rule and its false-alarm figures.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import zip_longest
from typing import Literal

Verdict = Literal["faster", "slower", "same", "inconclusive"]
DEFAULT_ALPHA = 0.01
POOL_REPEATS = 64  # at most this many repeats on a side that pools several runs (and the DP stays small)
# (percentile, attribute) of each summary value a row keeps; positions follow numpy's default
QUANTILES = ((0, "min"), (50, "median"), (90, "p90"), (99, "p99"), (100, "max"))


@dataclass(frozen=True)
class Sample:
    """One row's repeats as the results keep them (latencies in microseconds)."""

    n: int
    median: float
    min: float
    max: float
    p90: float | None = None
    p99: float | None = None

    @property
    def spread(self) -> float:
        """The repeats' full range relative to their median: this row's own noise."""
        return (self.max - self.min) / self.median

    def bounds(self) -> tuple[list[float], list[float]]:
        """(lower, upper) bounds on each of the n sorted repeats that the summary values prove.

        A value at fractional position p (interpolated between sorted repeats floor(p) and ceil(p))
        is at most the repeat at ceil(p) and at least the repeat at floor(p).
        """
        lower, upper = [-math.inf] * self.n, [math.inf] * self.n
        for percent, name in QUANTILES:
            value = getattr(self, name)
            if value is None:
                continue
            scaled = percent * (self.n - 1)  # position x 100, kept integral so 90% of 10 is exactly 9
            floor, ceil = scaled // 100, -(-scaled // 100)
            for i in range(self.n):
                if i >= ceil:
                    lower[i] = max(lower[i], value)
                if i <= floor:
                    upper[i] = min(upper[i], value)
        return lower, upper


@lru_cache(maxsize=256)
def _u_tail(m: int, n: int) -> tuple[float, ...]:
    """P(U >= u) for u = 0..m*n, where U counts the pairs (a, b) with b > a among m a's and n b's in a
    uniformly random order.

    The counts of orders by U are the coefficients of the Gaussian binomial [m+n choose n]_q, the
    product over i = 1..n of (1 - q^(m+i)) / (1 - q^i); every partial product is a polynomial, so
    each step multiplies, then divides exactly. Python integers keep the tails exact.
    """
    counts = [1]
    for i in range(1, n + 1):
        shifted = [0] * (m + i) + counts
        counts = [a - b for a, b in zip_longest(counts, shifted, fillvalue=0)]
        for k in range(i, len(counts)):  # divide by (1 - q^i)
            counts[k] += counts[k - i]
        del counts[m * i + 1 :]  # the quotient's degree is m*i; what lies above is zero
    total = math.comb(m + n, n)
    tail, running = [], 0
    for count in reversed(counts):
        running += count
        tail.append(running / total)
    return tuple(reversed(tail))


@lru_cache(maxsize=4096)
def _bounds(sample: Sample) -> tuple[list[float], list[float]]:
    return sample.bounds()


def p_exceeds(low: Sequence[Sample], high: Sequence[Sample]) -> float:
    """Exact one-sided p-value that `high`'s repeats sit above `low`'s at least as far as the
    summaries prove, if every repeat of both sides were a draw from one distribution."""
    low_upper = sorted(bound for sample in low for bound in _bounds(sample)[1])
    high_lower = [bound for sample in high for bound in _bounds(sample)[0]]
    certain = sum(bisect_left(low_upper, b) for b in high_lower)  # pairs with a < b for certain
    return _u_tail(len(low_upper), len(high_lower))[certain]


def pool(samples: Iterable[Sample], limit: int = POOL_REPEATS) -> list[Sample]:
    """The first samples (nearest or newest first) up to `limit` repeats, and always at least one."""
    pooled: list[Sample] = []
    repeats = 0
    for sample in samples:
        if pooled and repeats + sample.n > limit:
            break
        pooled.append(sample)
        repeats += sample.n
    return pooled


def level(side: Sequence[Sample]) -> float:
    """A side's latency: the median of its rows' medians."""
    return statistics.median(s.median for s in side)


def noise(side: Sequence[Sample]) -> float:
    """A side's relative noise: its typical within-run spread, or the spread between its runs'
    medians when several runs disagree more than their repeats do."""
    within = statistics.median(s.spread for s in side)
    medians = [s.median for s in side]
    return max(within, (max(medians) - min(medians)) / level(side))


@dataclass(frozen=True)
class Shift:
    """Side B against side A at one point, before a family's correction decides significance."""

    ratio: float  # level B / level A
    p_value: float  # two-sided, exact (see module docstring)
    noise: float  # the larger relative noise of the two sides

    @property
    def change(self) -> float:
        return self.ratio - 1

    @property
    def direction(self) -> Verdict:
        return "slower" if self.ratio > 1 else "faster"


def shift(a: Sequence[Sample], b: Sequence[Sample]) -> Shift:
    """Each side is one row, or several rows of the same point (runs pooled: see docs/reports.md)."""
    p = min(1.0, 2 * min(p_exceeds(a, b), p_exceeds(b, a)))
    return Shift(ratio=level(b) / level(a), p_value=p, noise=max(noise(a), noise(b)))


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down: which of a family's tests reject, keeping P(any false rejection) <= alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


def verdict(s: Shift, significant: bool) -> tuple[Verdict, str]:
    """(verdict, why) from a shift and whether its family's correction kept it significant."""
    beyond_noise = abs(s.change) > s.noise
    change, noise, p = f"{s.change:+.1%}", f"noise {s.noise:.1%}", f"p={s.p_value:.1g}"
    if significant and beyond_noise:
        return s.direction, f"{change} beyond {noise}, {p}"
    if not significant and not beyond_noise:
        return "same", f"{change} within {noise}"
    if significant:
        return "inconclusive", f"{change} within {noise} though {p}"
    return "inconclusive", f"{change} beyond {noise} but {p} is not significant: more repeats"


def verdicts(shifts: Sequence[Shift], alpha: float = DEFAULT_ALPHA) -> list[tuple[Verdict, str]]:
    """One family's verdicts (a comparison, or one night's steps): Holm over their p-values."""
    significant = holm([s.p_value for s in shifts], alpha)
    return [verdict(s, sig) for s, sig in zip(shifts, significant, strict=True)]


def smallest_p(n_a: int, n_b: int) -> float:
    """The best two-sided p-value n_a and n_b repeats can ever give (every B beyond every A)."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))
