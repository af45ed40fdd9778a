"""The statistics behind every verdict: the exact null distribution, the bounds a summary proves,
the test's level under no change, Holm's correction, and the verdict rule."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from kernelsweep.report.stats import Sample, _u_tail, holm, p_exceeds, pool, shift, smallest_p, verdict, verdicts


def summary(values) -> Sample:
    x = np.asarray(values, dtype=float)
    return Sample(
        n=len(x),
        median=float(np.median(x)),
        min=float(x.min()),
        max=float(x.max()),
        p90=float(np.percentile(x, 90)),
        p99=float(np.percentile(x, 99)),
    )


@pytest.mark.parametrize("m,n", [(1, 1), (2, 3), (3, 3), (4, 2), (5, 4), (3, 6)])
def test_the_null_distribution_is_the_count_of_every_order(m, n):
    """P(U >= u) against brute force over all C(m+n, n) placements of the b's."""
    counts: dict[int, int] = {}
    for places in itertools.combinations(range(m + n), n):
        u = sum(sum(1 for a in range(m + n) if a not in places and a < b) for b in places)
        counts[u] = counts.get(u, 0) + 1
    total = math.comb(m + n, n)
    expected = [sum(c for value, c in counts.items() if value >= u) / total for u in range(m * n + 1)]
    assert _u_tail(m, n) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 10, 11, 20])
def test_a_summary_bounds_every_sorted_repeat(n):
    rng = np.random.default_rng(n)
    for _ in range(200):
        values = rng.lognormal(size=n)
        lower, upper = summary(values).bounds()
        ordered = np.sort(values)
        assert all(lo <= v <= hi for lo, v, hi in zip(lower, ordered, upper, strict=True))


def test_every_repeat_beyond_every_other_gives_the_smallest_p_value():
    a, b = summary([10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6]), summary([12.0, 12.1, 12.2, 12.3, 12.4, 12.5, 12.6])
    assert p_exceeds([a], [b]) == pytest.approx(1 / math.comb(14, 7))
    assert p_exceeds([b], [a]) == 1.0
    assert shift([a], [b]).p_value == pytest.approx(smallest_p(7, 7))


def test_under_no_change_the_test_keeps_its_level():
    """Same distribution both sides (seeded draws): P(p <= alpha) stays at or below alpha."""
    rng = np.random.default_rng(7)
    for n in (5, 7):
        p = np.array(
            [shift([summary(rng.normal(1, 0.01, n))], [summary(rng.normal(1, 0.01, n))]).p_value for _ in range(3000)]
        )
        for alpha in (0.01, 0.05, 0.2):
            assert (p <= alpha).mean() <= alpha


def test_pooled_runs_are_stronger_than_one():
    rng = np.random.default_rng(3)
    before = [summary(rng.normal(100, 1, 3)) for _ in range(5)]
    after = [summary(rng.normal(103, 1, 3)) for _ in range(3)]
    assert shift(before, after).p_value < shift(before[-1:], after[:1]).p_value
    assert sum(s.n for s in pool(before + after, limit=9)) == 9 and pool([summary([1.0] * 80)], limit=9)  # never empty


def test_holm_steps_down():
    assert holm([0.001, 0.04, 0.03], alpha=0.05) == [True, False, False]  # 0.03 > 0.05/2
    assert holm([0.001, 0.02, 0.03], alpha=0.05) == [True, True, True]  # 0.02 <= 0.05/2, 0.03 <= 0.05/1
    assert holm([0.2], alpha=0.05) == [False]


def test_a_verdict_needs_both_significance_and_a_shift_beyond_the_noise():
    tight = summary([100.0, 100.2, 100.4, 100.6, 100.8, 101.0, 101.2])
    slower = summary([v * 1.2 for v in [100.0, 100.2, 100.4, 100.6, 100.8, 101.0, 101.2]])
    assert verdicts([shift([tight], [slower])])[0][0] == "slower"
    assert verdicts([shift([slower], [tight])])[0][0] == "faster"
    assert verdicts([shift([tight], [summary([100.1, 100.3, 100.5, 100.7, 100.9, 101.1, 100.0])])])[0][0] == "same"
    # every repeat of B above every repeat of A, but by less than A's own spread: not a verdict
    noisy = summary([90.0, 95.0, 99.0, 100.0, 101.0, 105.0, 110.0])
    above = summary([110.5, 110.6, 110.7, 110.8, 110.9, 111.0, 111.1])
    decided, why = verdict(shift([noisy], [above]), significant=True)
    assert decided == "inconclusive" and "within noise" in why


def test_one_capture_per_point_can_never_decide():
    one_a, one_b = summary([100.0]), summary([150.0])
    decided, why = verdicts([shift([one_a], [one_b])])[0]
    assert decided == "inconclusive" and "more repeats" in why
    assert smallest_p(3, 3) > 0.05  # three repeats a side cannot reach 5% two-sided
