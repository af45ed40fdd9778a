"""How often `compare` calls a point slower, same or inconclusive, by repeats, true change and
run-level noise, over a 300-point sweep: the false-alarm and power tables of docs/reports.md.

Each point's latencies are drawn like the simulator draws them (kernelsweep.sim: a 1% normal jitter
per repeat, and a normal shift per point per run with the run-level standard deviation), and the
real verdict code decides them (kernelsweep.report.stats: effect, then decide over the 300 points).
Each point has HISTORY earlier nights of its series, from which its run-to-run spread is learned,
as `compare --runs` learns it from the results. Nothing here is measured: the figures follow from
the configured noise and the rule. Every point of a sweep has the same true change, so "+0%" is the
false-alarm rate and the rest are power.

    python benchmarks/verdicts.py [--families 4] [--points 300]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

from kernelsweep.report.stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD, Rule, Sample, decide, effect, spread_of

JITTER = 0.01  # kernelsweep.sim.model.predict's per-repeat jitter
HISTORY = 20  # earlier nights of each series the run-to-run spread is learned from (about three weeks)
REPEATS = (3, 5, 10, 20)
CHANGES = (0.0, 0.03, 0.05, 0.10, 0.20)
RUN_NOISE = (0.0, 0.005, 0.01, 0.02)


def runs(
    rng: np.random.Generator, points: int, count: int, repeats: int, run_noise: float, change: float
) -> np.ndarray:
    """Latencies, shape (points, count, repeats): each run of each point shifted on its own."""
    shift = 1 + run_noise * rng.standard_normal((points, count, 1))
    return 100 * (1 + change) * shift * (1 + JITTER * rng.standard_normal((points, count, repeats)))


def sample(values: np.ndarray) -> Sample:
    return Sample(
        n=len(values),
        median=float(np.median(values)),
        min=float(values.min()),
        max=float(values.max()),
        values=tuple(values.tolist()),
    )


def family(
    rng: np.random.Generator, points: int, repeats: int, change: float, run_noise: float, per_side: int, rule: Rule
) -> Counter[str]:
    """One comparison of `points` points: verdict counts."""
    history = np.log(np.median(runs(rng, points, HISTORY, repeats, run_noise, 0.0), axis=2))
    a = runs(rng, points, per_side, repeats, run_noise, 0.0)
    b = runs(rng, points, per_side, repeats, run_noise, change)
    effects = []
    for i in range(points):
        spread = spread_of([history[i]], f"{HISTORY} earlier nights")
        side_a, side_b = [sample(r) for r in a[i]], [sample(r) for r in b[i]]
        effects.append(
            effect(side_a, side_b, threshold=rule.threshold, alpha=rule.alpha, spread_a=spread, spread_b=spread)
        )
    return Counter(verdict for verdict, _, _ in decide(effects, rule))


def rates(
    seed: int, points: int, families: int, repeats: int, change: float, run_noise: float, per_side: int
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts: Counter[str] = Counter()
    for _ in range(families):
        counts += family(rng, points, repeats, change, run_noise, per_side, Rule())
    total = sum(counts.values())
    return {verdict: counts[verdict] / total for verdict in ("slower", "same", "inconclusive", "faster")}


def table(per_side: int, points: int, families: int) -> None:
    print(f"\n{per_side} run(s) per side, {points} points, {families} sweeps a line; % of points called slower")
    header = " | ".join(f"{c:+.0%}" for c in CHANGES)
    print(f"| repeats | run-level sd | {header} | +0% called same |")
    print("|---|---|" + "---|" * (len(CHANGES) + 1))
    for repeats in REPEATS:
        for run_noise in RUN_NOISE:
            cells, same = [], 0.0
            for change in CHANGES:
                seed = hash((per_side, repeats, run_noise, change)) % 2**32
                found = rates(seed, points, families, repeats, change, run_noise, per_side)
                cells.append(f"{100 * found['slower']:.1f}")
                same = found["same"] if change == 0 else same
            print(f"| {repeats} | {run_noise:.1%} | {' | '.join(cells)} | {100 * same:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", type=int, default=4, help="sweeps drawn per line")
    parser.add_argument("--points", type=int, default=300)
    args = parser.parse_args()
    rule = Rule()
    print(
        f"threshold +-{DEFAULT_THRESHOLD:.0%}, alpha {DEFAULT_ALPHA} ({1 - 2 * DEFAULT_ALPHA:.0%} intervals), "
        f"{rule.describe(args.points)}; jitter {JITTER:.0%} per repeat; run-to-run spread from {HISTORY} earlier nights"
    )
    started = time.perf_counter()
    for per_side in (1, 3):
        table(per_side, args.points, args.families)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
