"""Run-to-run noise for every point of a comparison, borrowed across the sweep's points.

One point's history is a few runs: its spread is known to within a wide t (19 df at best), and a
point's first compare has no spread at all. But a sweep's points on one platform and toolchain share
their machine, so their spreads are alike: an empirical-Bayes prior over the points (Smyth's
moderated variance, the one limma uses for thousands of genes) shrinks each point's own spread
towards the group's and adds the group's degrees of freedom to it. A lone change among 500 points
then meets the family correction with a near-normal tail instead of t(19)'s, and a point with no
history of its own is judged on the group's noise instead of on its repeats alone.

When no point of a group has history (a sweep's first compare), the group's noise comes from the
compared points themselves: the spread of their changes around no change, B / A = 1 (a robust scale,
so a minority of changed points does not inflate it). Taken around 1 rather than around the median,
it keeps a shift the whole run took inside the noise: a first compare cannot tell such a shift from
a change, so it is never called a regression.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np
from scipy.special import digamma, polygamma

from kernelsweep.report.stats import Spread

MIN_POINTS = 8  # fewer points than this say nothing about the group's noise: no prior
MAD_EFFICIENCY = 0.37  # the median absolute deviation's efficiency against the sd: its degrees of freedom per point


def trigamma(x: float | np.ndarray) -> np.ndarray:
    return np.asarray(polygamma(1, x), dtype=float)


def trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y (Newton's method as limma does it)."""
    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = float(trigamma(x))
        step = tri * (1 - tri / y) / float(polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def fit(spreads: Sequence[Spread]) -> Spread:
    """The prior (s0^2 with d0 degrees of freedom, as a Spread) of a group's spreads, by the method of
    moments on log variances. d0 is capped by the group's own degrees of freedom: the prior never
    claims more than the points hold."""
    known = [s for s in spreads if s.df > 0 and s.ss > 0]
    if len(known) < MIN_POINTS:
        return Spread()
    df = np.array([s.df for s in known], dtype=float)
    logs = np.log([s.variance for s in known])
    centred = logs - digamma(df / 2) + np.log(df / 2)
    mean = float(centred.mean())
    excess = float(np.var(centred, ddof=1) - np.mean(trigamma(df / 2)))
    cap = float(df.sum())
    d0 = min(cap, 2 * trigamma_inverse(excess)) if excess > 0 else cap
    s0 = math.exp(mean + float(digamma(d0 / 2)) - math.log(d0 / 2))
    return Spread(s0 * d0, d0, f"the prior over {len(known)} points' histories")


def from_changes(log_ratios: Sequence[float], runs: int = 2) -> Spread:
    """A group's run-to-run variance from its points' changes with one run a side: each change is the
    difference of `runs` run levels, so its variance is `runs` x the run's, scaled robustly around 0."""
    changes = np.abs(np.asarray(log_ratios, dtype=float))
    if len(changes) < MIN_POINTS:
        return Spread()
    scale = float(np.median(changes)) / 0.6745
    df = MAD_EFFICIENCY * (len(changes) - 1)
    return Spread(scale**2 / runs * df, df, f"the spread of {len(changes)} points' changes around no change")


def moderate(own: Spread, prior: Spread) -> Spread:
    """A point's spread with the group's prior added: the posterior variance and its degrees of freedom."""
    if not prior.df:
        return own
    return Spread(own.ss + prior.ss, own.df + prior.df, f"{own.source} and {prior.source}" if own.df else prior.source)


Key = TypeVar("Key", bound=Hashable)
Group = TypeVar("Group", bound=Hashable)


def group_priors(spreads: Mapping[Key, Spread], group_of: Mapping[Key, Group]) -> dict[Group, Spread]:
    """The prior of each group, fitted on the spreads of its members."""
    members: dict[Group, list[Spread]] = {}
    for key, spread in spreads.items():
        members.setdefault(group_of[key], []).append(spread)
    return {group: fit(found) for group, found in members.items()}
