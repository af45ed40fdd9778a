"""The statistics behind every verdict: the exact null distribution, p-values from raw repeats against
scipy's exact Mann-Whitney, the exact interval and its duality with the tests, the summary bound for
schema 1 rows, the family corrections, and the verdict rule (threshold, equivalence, outliers)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from kernelsweep.report import ranks
from kernelsweep.report.ranks import median_interval, reach_warning
from kernelsweep.report.stats import Rule, Sample, Spread, adjusted, decide, effect


def sample(values) -> Sample:
    x = np.asarray(values, dtype=float)
    return Sample(
        n=len(x),
        median=float(np.median(x)),
        min=float(x.min()),
        max=float(x.max()),
        p90=float(np.percentile(x, 90)),
        p99=float(np.percentile(x, 99)),
        values=tuple(x.tolist()),
    )


def summary_only(values) -> Sample:
    s = sample(values)
    return Sample(s.n, s.median, s.min, s.max, s.p90, s.p99)


@pytest.mark.parametrize("m,n", [(1, 1), (2, 3), (3, 3), (4, 2), (5, 4), (3, 6)])
def test_the_null_distribution_is_the_count_of_every_order(m, n):
    """P(U >= u) against brute force over all C(m+n, n) placements of the b's."""
    counts: dict[int, int] = {}
    for places in itertools.combinations(range(m + n), n):
        u = sum(sum(1 for a in range(m + n) if a not in places and a < b) for b in places)
        counts[u] = counts.get(u, 0) + 1
    total = math.comb(m + n, n)
    expected = [sum(c for value, c in counts.items() if value >= u) / total for u in range(m * n + 1)]
    assert ranks.u_tail(m, n) == pytest.approx(expected, abs=1e-12)


HAND_CASES = {  # (a, b): the review's table, and cases with ties and unequal sizes
    "3v3 complete separation": ([1, 2, 3], [4, 5, 6]),
    "5v5 complete separation": ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]),
    "7v7 one overlap": ([1, 2, 3, 4, 5, 6, 10.5], [10, 11, 12, 13, 14, 15, 16]),
    "7v7 interleaved shift": ([100, 101, 102, 103, 104, 105, 106], [102.5, 103.5, 104.5, 105.5, 106.5, 107.5, 108.5]),
    "7v7 ties at the medians": ([1, 2, 3, 5, 6, 7, 8], [4, 4.5, 5, 5, 9, 10, 11]),
    "10v10 shift of about 1 sd": (list(100 + np.arange(10)), list(103.3 + np.arange(10))),
    "4v9 unequal sizes": ([10, 12, 11, 13], [12.5, 14, 15, 11.5, 16, 13.5, 17, 12.2, 18]),
    "identical": ([5, 5, 5], [5, 5, 5]),
    "B faster": ([20, 21, 22, 23, 24], [10, 11, 12, 13, 25]),
}


@pytest.mark.parametrize("case", list(HAND_CASES))
def test_p_values_from_raw_repeats_are_scipys_exact_mann_whitney(case):
    a, b = (np.asarray(x, dtype=float) for x in HAND_CASES[case])
    expected = mannwhitneyu(b, a, alternative="two-sided", method="exact").pvalue
    assert ranks.mann_whitney_p(a, b) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_p_values_agree_with_scipy_on_random_runs():
    rng = np.random.default_rng(20261126)
    for n in (3, 5, 7, 10, 20):
        a = 100 * (1 + 0.01 * rng.standard_normal((40, n)))
        b = 100 * (1.01 + 0.01 * rng.standard_normal((40, n)))
        ours = [ranks.mann_whitney_p(x, y) for x, y in zip(a, b, strict=True)]
        theirs = mannwhitneyu(b, a, alternative="two-sided", method="exact", axis=1).pvalue
        assert np.allclose(ours, theirs, rtol=1e-9, atol=1e-15)


def test_the_exact_interval_covers_and_is_dual_to_the_tests():
    """90% intervals cover the true shift at least 90% of the time, and lie above the margin exactly
    when the one-sided test of that margin rejects at alpha."""
    rng = np.random.default_rng(5)
    down, up = math.log(0.98), math.log(1.02)
    a = np.exp(0.01 * rng.standard_normal((2000, 7)))
    b = np.exp(0.03 + 0.01 * rng.standard_normal((2000, 7)))
    shifts = [ranks.exact_interval(x, y, 0.05, down, up) for x, y in zip(a, b, strict=True)]
    assert np.mean([s.low <= 0.03 <= s.high for s in shifts]) >= 0.9
    assert all((s.low > up) == (s.p_above <= 0.05) for s in shifts)
    assert all((s.high < down) == (s.p_below <= 0.05) for s in shifts)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 10, 11, 20])
def test_a_summary_bounds_every_sorted_repeat(n):
    rng = np.random.default_rng(n)
    for _ in range(100):
        values = rng.lognormal(size=n)
        lower, upper = summary_only(values).summary().bounds()
        ordered = np.sort(values)
        assert np.all(lower <= ordered) and np.all(ordered <= upper)


def test_rows_without_raw_repeats_fall_back_to_the_summary_bound_and_say_so():
    rng = np.random.default_rng(11)
    a, b = 100 * (1 + 0.01 * rng.standard_normal(10)), 110 * (1 + 0.01 * rng.standard_normal(10))
    raw = effect([sample(a)], [sample(b)])
    old = effect([summary_only(a)], [summary_only(b)])
    assert "summaries" in old.method and "summaries" not in raw.method
    assert old.low <= raw.low and raw.high <= old.high  # the bound is wider, never narrower
    assert old.ratio == pytest.approx(raw.ratio)  # both are the ratio of the medians


def test_adjusted_p_values_match_the_definitions():
    p = [0.01, 0.04, 0.03, 0.005]
    # BH: sorted 0.005, 0.01, 0.03, 0.04 -> min over later of p_(k) m / k = 0.02, 0.02, 0.04, 0.04
    assert adjusted(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    # Holm: running max of (m - k + 1) p_(k) = 0.02, 0.03, 0.06, 0.06
    assert adjusted(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjusted([0.9], "bh") == [0.9]


def _run(rng, n, centre, jitter=0.01):
    return sample(centre * (1 + jitter * rng.standard_normal(n)))


def test_same_needs_the_interval_inside_the_threshold():
    rng = np.random.default_rng(2)
    tight = [effect([_run(rng, 20, 100, 0.002)], [_run(rng, 20, 100.3, 0.002)])]
    assert decide(tight, Rule())[0][0] == "same"
    noisy = [effect([_run(rng, 5, 100, 0.03)], [_run(rng, 5, 100.3, 0.03)])]
    decided, why, _ = decide(noisy, Rule())[0]
    assert decided == "inconclusive" and "crosses" in why  # absence of evidence is not equivalence


def test_one_slow_repeat_in_the_baseline_never_hides_a_ten_percent_regression():
    """The review's case: 7 v 7 (and 10 v 10), B 10% slower, one baseline repeat at +25%."""
    rng = np.random.default_rng(9)
    for n in (7, 10):
        for _ in range(50):
            a = 100 * (1 + 0.01 * rng.standard_normal(n))
            a[rng.integers(n)] = 125.0
            b = 110 * (1 + 0.01 * rng.standard_normal(n))
            decided, why, _ = decide([effect([sample(a)], [sample(b)])], Rule())[0]
            assert decided in ("slower", "inconclusive") and decided != "same", why
            if n == 10:
                assert decided == "slower", why


def test_exit_zero_is_never_given_when_an_interval_crosses_the_threshold():
    """Random comparisons of all kinds: every same or faster point's interval stays off +-t."""
    rng = np.random.default_rng(4)
    for _ in range(200):
        n, change, jitter = (
            int(rng.integers(3, 12)),
            float(rng.choice([0, 0.01, 0.02, 0.03, 0.1])),
            rng.uniform(0.002, 0.03),
        )
        effects = [effect([_run(rng, n, 100, jitter)], [_run(rng, n, 100 * (1 + change), jitter)]) for _ in range(5)]
        for e, (decided, _, _) in zip(effects, decide(effects, Rule()), strict=True):
            crosses = e.low < 1.02 < e.high or e.low < 0.98 < e.high
            assert not (crosses and decided in ("same", "faster")), (e, decided)


def test_the_run_level_spread_widens_the_interval():
    rng = np.random.default_rng(8)
    a, b = _run(rng, 10, 100), _run(rng, 10, 103)
    alone = effect([a], [b])
    history = Spread(ss=19 * 0.01**2, df=19, source="history")
    with_runs = effect([a], [b], spread_a=history, spread_b=history)
    assert with_runs.low < alone.low and with_runs.high > alone.high and "t on run levels" in with_runs.method
    assert "run-to-run noise unknown" in alone.method


def test_several_runs_a_side_make_the_run_the_unit():
    rng = np.random.default_rng(12)
    shifts = 1 + 0.02 * rng.standard_normal(6)  # runs differ far more than their repeats
    a = [_run(rng, 10, 100 * s, 0.002) for s in shifts[:3]]
    b = [_run(rng, 10, 100 * s, 0.002) for s in shifts[3:]]
    pooled = effect(a, b)
    assert pooled.runs == (3, 3) and "t on run levels" in pooled.method
    assert pooled.high - pooled.low > 0.03  # the run-to-run spread, not the repeats' 0.2%


def test_the_preflight_names_the_repeats_that_would_decide():
    assert reach_warning(10, 300) is None
    warning = reach_warning(7, 300)
    assert warning and "8 repeats can decide" in warning
    assert "3 repeats can decide" in (reach_warning(1, 1) or "")  # 1 / C(6, 3) = 0.05


def test_the_median_interval_comes_from_order_statistics():
    values = list(range(1, 11))  # 10 values: the 95% interval of the median is x(2)..x(9)
    assert median_interval(values, 0.95) == (2, 9)
    assert median_interval([5.0], 0.95) == (5.0, 5.0)
