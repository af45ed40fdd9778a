"""How often the same-version re-runs of tests/test_regress_compiler.py see a false call, by design: the
test's three points, 21 nights of one lineage (and the upgrade's two nights, a lineage of their own), 7
repeats, the simulator's 1% jitter per repeat and its default 1% run-level shift, each night compared
with the night before through the real verdict code (kernelsweep.report.stats: effect, then decide over
the three points, the series' other runs as its history, as `compare --runs` learns it).

The dataset the test builds is one draw of this (seeded: the same in every clone); this prints how
often a draw holds one, two or more `slower` or `faster` calls among its 60 no-change comparisons, so
the test's allowance can be read against the rule's own false-call rate.

    python benchmarks/reruns.py [--datasets 2000] [--seed 1]
"""

from __future__ import annotations

import argparse

import numpy as np
from verdicts import runs, sample  # the simulator's draw and the Sample, as the verdict tables make them

from kernelsweep.report.stats import Rule, decide, effect, spread_of

POINTS, NIGHTS, UPGRADE_NIGHTS, REPEATS = 3, 21, 2, 7  # tests/report_data.py
RUN_NOISE = 0.01  # kernelsweep.sim's default run-level shift, per point per run


def false_calls(rng: np.random.Generator) -> list[str]:
    """One dataset: every `slower` or `faster` among its 20 x 3 night-against-the-night-before verdicts."""
    nights = NIGHTS + UPGRADE_NIGHTS
    latencies = runs(rng, POINTS, nights, REPEATS, RUN_NOISE, change=0.0)
    levels = np.log(np.median(latencies, axis=2))
    calls = []
    for night in range(1, NIGHTS):
        effects = []
        for point in range(POINTS):
            others = [k for k in range(NIGHTS) if k not in (night - 1, night)]
            spread = spread_of([levels[point, others], levels[point, NIGHTS:]], "other runs")
            before, after = sample(latencies[point, night - 1]), sample(latencies[point, night])
            effects.append(effect([before], [after], spread_a=spread, spread_b=spread))
        calls += [verdict for verdict, _, _ in decide(effects, Rule()) if verdict in ("slower", "faster")]
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    drawn = [false_calls(rng) for _ in range(args.datasets)]
    counts = np.array([len(calls) for calls in drawn])
    slower = sum(calls.count("slower") for calls in drawn)
    comparisons = args.datasets * (NIGHTS - 1) * POINTS
    print(
        f"{args.datasets} datasets, {comparisons} no-change point comparisons: "
        f"{slower} slower, {int(counts.sum()) - slower} faster ({counts.sum() / comparisons:.3%} of comparisons)"
    )
    for least in (1, 2, 3):
        print(f"datasets with >= {least} false call(s): {np.mean(counts >= least):.1%}")
    print(f"datasets with >= 1 false slower: {np.mean([calls.count('slower') >= 1 for calls in drawn]):.1%}")


if __name__ == "__main__":
    main()
