"""Exact rank statistics for two runs' repeats: the Mann-Whitney test and the Hodges-Lehmann shift
with its exact confidence interval, from the raw latencies, or bounded from a row's summary.

Everything is on log latencies, so a shift is a ratio: exp(shift) = B / A (estimated as the ratio
of the two runs' medians). If nothing changed
(every repeat of both runs an independent draw from one continuous distribution), every order of
the pooled repeats is equally likely and U, the number of pairs (a, b) with b > a, has the exact
null distribution `u_tail` computes. Inverting that test over shifts gives the Hodges-Lehmann
interval (Lehmann 1963; Hollander & Wolfe ch. 4): with D the m x n differences b_j - a_i sorted, the
shift lies in [D_(c), D_(mn+1-c)] with confidence 1 - 2 P(U <= c - 1), distribution-free.

A row written before schema 2 keeps five summary values, not the repeats. Each value sits at a known
position among the sorted repeats (numpy's linear interpolation), so it bounds every sorted repeat;
the pairs *certainly* ordered give a lower bound on U, and the interval is widened to what every
repeat set with that summary allows. That is conservative (exact for n <= 3) and is said so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import zip_longest

import numpy as np

# (percentile, attribute) of each summary value a row keeps; positions follow numpy's default
QUANTILES = ((0, "min"), (50, "median"), (90, "p90"), (99, "p99"), (100, "max"))


@lru_cache(maxsize=256)
def u_tail(m: int, n: int) -> tuple[float, ...]:
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


def tail_at(m: int, n: int, u: float) -> float:
    """P(U >= u); a U with ties (counted 1/2) is at least the next whole number."""
    if u <= 0:
        return 1.0
    whole = math.ceil(u - 1e-9)
    return 0.0 if whole > m * n else u_tail(m, n)[whole]


def smallest_p(m: int, n: int) -> float:
    """The best one-sided p-value m and n repeats can ever give (every b beyond every a)."""
    return 1 / math.comb(m + n, n)


def repeats_needed(points: int, alpha: float = 0.05) -> int:
    """The fewest repeats a side for which one changed point among `points` can be called, one run
    a side: the best one-sided p, 1 / C(2n, n), must reach Benjamini-Hochberg's smallest threshold."""
    n = 1
    while smallest_p(n, n) > alpha / max(points, 1):
        n += 1
    return n


def reach_warning(repeats: int, points: int, alpha: float = 0.05) -> str | None:
    """One line when `repeats` a side cannot call a single changed point among `points`, else None."""
    best = smallest_p(repeats, repeats)
    if best <= alpha / max(points, 1):
        return None
    need = repeats_needed(points, alpha)
    return (
        f"{repeats} repeat(s) a side reach p={best:.2g} at best, above {alpha:g}/{points} (what a lone change "
        f"among {points} point(s) needs): such a point can only be inconclusive; {need} repeats can decide it"
    )


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for a run's median from its order statistics (binomial)."""
    x = sorted(values)
    if not x:
        return math.nan, math.nan
    low, high = order_ranks(len(x), confidence)
    return x[low], x[high]


def order_ranks(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """The 0-based order statistics of `n` sorted values that bound their median with `confidence`:
    the same for every run of `n` repeats, so many runs' intervals are two columns of a sorted matrix."""
    if n < 2:
        return 0, max(0, n - 1)
    cdf, j = 0.0, 0
    while j < n and cdf + math.comb(n, j) / 2**n <= (1 - confidence) / 2:
        cdf += math.comb(n, j) / 2**n
        j += 1
    return (j - 1, n - j) if j else (0, n - 1)


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Exact two-sided Mann-Whitney p-value of two runs' raw latencies (ties count 1/2)."""
    diffs = np.subtract.outer(np.log(b), np.log(a))
    u = float((diffs > 0).sum() + 0.5 * (diffs == 0).sum())
    m, n = len(a), len(b)
    return min(1.0, 2 * min(tail_at(m, n, u), tail_at(m, n, m * n - u)))


@dataclass(frozen=True)
class RankShift:
    """Run B against run A on the log scale: the shift estimate, its interval, and one-sided
    p-values that the shift lies above `up` and below `down` (the threshold's log margins)."""

    shift: float
    low: float
    high: float
    p_value: float  # two-sided, no change
    p_above: float
    p_below: float


def _c(m: int, n: int, alpha: float) -> int:
    """The largest c with P(U <= c - 1) <= alpha: D_(c) is the one-sided (1 - alpha) lower bound."""
    tail = u_tail(m, n)  # P(U <= c - 1) = P(U >= mn - c + 1) by symmetry
    c = 0
    while c < m * n and tail[m * n - c] <= alpha:
        c += 1
    return c


def exact_interval(a: np.ndarray, b: np.ndarray, alpha: float, down: float, up: float) -> RankShift:
    """From raw latencies: the exact interval at confidence 1 - 2 alpha, and the exact tests. The
    estimate is the ratio of the medians, so a table's A and B reproduce it."""
    diffs = np.sort(np.subtract.outer(np.log(b), np.log(a)), axis=None)
    estimate = math.log(float(np.median(b)) / float(np.median(a)))
    shift = _from_differences(diffs, diffs, len(a), len(b), alpha, down, up, estimate)
    return replace(shift, p_value=mann_whitney_p(a, b))  # ties count 1/2, as every textbook (and scipy) does


def bounded(a: Sample5, b: Sample5, alpha: float, down: float, up: float) -> RankShift:
    """From two rows' summaries: the interval and tests every repeat set they allow agrees with."""
    a_low, a_high = (np.log(np.maximum(x, 1e-300)) for x in a.bounds())
    b_low, b_high = (np.log(np.maximum(x, 1e-300)) for x in b.bounds())
    lowest = np.sort(np.subtract.outer(b_low, a_high), axis=None)  # each difference is at least this
    highest = np.sort(np.subtract.outer(b_high, a_low), axis=None)  # and at most this
    return _from_differences(lowest, highest, a.n, b.n, alpha, down, up, math.log(b.median / a.median))


def _from_differences(
    lowest: np.ndarray, highest: np.ndarray, m: int, n: int, alpha: float, down: float, up: float, estimate: float
) -> RankShift:
    c = _c(m, n, alpha)
    low = float(lowest[c - 1]) if c else -math.inf
    high = float(highest[m * n - c]) if c else math.inf
    above = float((lowest > 0).sum())  # pairs certainly b > a (all of them, from raw values)
    below = float((highest < 0).sum())
    p_value = min(1.0, 2 * min(tail_at(m, n, above), tail_at(m, n, below)))
    return RankShift(
        shift=estimate,
        low=low,
        high=high,
        p_value=p_value,
        p_above=tail_at(m, n, float((lowest > up).sum())),
        p_below=tail_at(m, n, float((highest < down).sum())),
    )


@dataclass(frozen=True)
class Sample5:
    """A row's repeats as schema 1 kept them: count and five summary values (microseconds)."""

    n: int
    median: float
    min: float
    max: float
    p90: float | None = None
    p99: float | None = None

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) bounds on each of the n sorted repeats that the summary values prove.

        A value at fractional position p (interpolated between sorted repeats floor(p) and ceil(p))
        is at most the repeat at ceil(p) and at least the repeat at floor(p).
        """
        lower, upper = np.full(self.n, 0.0), np.full(self.n, math.inf)
        index = np.arange(self.n)
        for percent, name in QUANTILES:
            value = getattr(self, name)
            if value is None:
                continue
            scaled = percent * (self.n - 1)  # position x 100, kept integral so 90% of 10 is exactly 9
            floor, ceil = scaled // 100, -(-scaled // 100)
            lower[index >= ceil] = np.maximum(lower[index >= ceil], value)
            upper[index <= floor] = np.minimum(upper[index <= floor], value)
        return lower, upper
