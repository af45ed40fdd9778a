"""Early dropping of a search trial that clearly loses: after its first captures, a trial whose
latencies lie wholly above the best trial's so far, by the verdict rule, is not captured further.

The rule is the report's (kernelsweep.report.stats) with one run a side: the exact rank interval of the
change (trial / best) at 1 - 2 alpha; the trial is dropped when that interval lies wholly above
+threshold. No family correction: a drop only decides where the remaining captures go, never which
configuration is best (the dropped trial's row and its median stay, and the search is told them), and
a correction over the budget would leave a quick search unable to drop anything. A rank interval
bounded at all needs C(m + n, n) >= 1 / alpha orders (m the best's captures, n the trial's first):
with fewer the check is not made (`can_decide`), so 3 repeats never drop after 2.

The rank interval knows nothing of run-to-run noise (each trial's own run shift): a trial within a few
percent of the best can be dropped on a bad draw of its run. What that costs in quality, and saves in
device time, is what benchmarks/search_effort.py prints per effort level.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelsweep.report.ranks import smallest_p
from kernelsweep.report.stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD, Sample, effect, interval
from kernelsweep.sweepspec.point import DropBar


def bar(after: int, best_us: Sequence[float], best: str) -> DropBar | None:
    """The bar a new trial must clear after `after` captures, set by the best trial so far; None when
    dropping is off (`after` 0) or its captures cannot bound the rule's interval."""
    if after < 1 or not best_us or not can_decide(len(best_us), after):
        return None
    return DropBar(after=after, best_us=list(best_us), best=best, threshold=DEFAULT_THRESHOLD, alpha=DEFAULT_ALPHA)


def can_decide(best_repeats: int, after: int, alpha: float = DEFAULT_ALPHA) -> bool:
    """Whether `after` captures against the best's `best_repeats` can ever bound the rank interval."""
    return smallest_p(best_repeats, after) <= alpha


def losing(drop: DropBar, latencies_us: Sequence[float]) -> str | None:
    """Why the trial stops here (its first captures lie clearly above the best's), or None to go on."""
    change = effect([Sample.of(drop.best_us)], [Sample.of(latencies_us)], threshold=drop.threshold, alpha=drop.alpha)
    if change.low <= 1 + drop.threshold:
        return None
    return (
        f"dropped after {len(latencies_us)} capture(s): {interval(change)} against the best so far "
        f"({drop.best}) lies above +{drop.threshold:.0%}"
    )
