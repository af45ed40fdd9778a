"""How often `compare` says slower, same or inconclusive, by repeats and true change.

Draws each point's repeats from the simulator's own noise model (model.predict: a normal jitter of
1% per capture), summarises them exactly as a row does (count, median, min, max, p90, p99), and runs
the real verdict code (kernelsweep.report.stats) over families of points, as one comparison would.
Nothing here is measured: the figures follow from the configured noise and the rule.

    python benchmarks/verdicts.py [--families 1000] [--points 1 10]
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from kernelsweep.report.stats import DEFAULT_ALPHA, Sample, shift, smallest_p, verdicts

JITTER = 0.01  # kernelsweep.sim.model.predict's default jitter
REPEATS = (3, 5, 7, 10)
CHANGES = (0.0, 0.02, 0.05, 0.20)


def summary(values: np.ndarray) -> Sample:
    return Sample(
        n=len(values),
        median=float(np.median(values)),
        min=float(values.min()),
        max=float(values.max()),
        p90=float(np.percentile(values, 90)),
        p99=float(np.percentile(values, 99)),
    )


def rates(rng: np.random.Generator, repeats: int, change: float, points: int, families: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for _ in range(families):
        shifts = []
        for _ in range(points):
            a = 100 * (1 + JITTER * rng.standard_normal(repeats))
            b = 100 * (1 + change) * (1 + JITTER * rng.standard_normal(repeats))
            shifts.append(shift([summary(a)], [summary(b)]))
        counts.update(decided for decided, _ in verdicts(shifts, DEFAULT_ALPHA))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", type=int, default=1000)
    parser.add_argument("--points", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    print(f"alpha {DEFAULT_ALPHA} (family-wise, Holm); noise {JITTER:.0%} normal per capture; {args.families} families")
    print(f"{'points':>6} {'repeats':>7} {'best p':>8} {'change':>7} {'slower':>8} {'same':>8} {'inconcl.':>8}")
    for points in args.points:
        for repeats in REPEATS:
            for change in CHANGES:
                counts = rates(rng, repeats, change, points, args.families)
                total = sum(counts.values())
                print(
                    f"{points:>6} {repeats:>7} {smallest_p(repeats, repeats):>8.1g} {change:>+7.0%} "
                    f"{counts['slower'] / total:>8.2%} {counts['same'] / total:>8.2%} "
                    f"{counts['inconclusive'] / total:>8.2%}"
                )


if __name__ == "__main__":
    main()
