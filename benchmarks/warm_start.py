"""Trials a search needs to reach within 5% of the grid's best, started cold or warm from the tuned
store (issue 36): docs/tuning.md's figures.

Per shape, the store holds what earlier searches would have left there: the grid's best and
runner-up (noiseless, by the simulator's model) at the two neighbouring shapes, M halved and doubled
(never the shape itself). Each seed runs the real search code twice (kernelsweep.search.study with
Optuna's seeded TPE, as benchmarks/search_quality.py does, told noisy medians): cold, and seeded with
`kernelsweep.tuned.warm.seeds` (the `warm_start = 2` default). A search reaches the mark at the first
trial whose configuration is, by the noiseless model, within 5% of the grid's best; one that never
does within the budget counts as budget + 1. Nothing is timed: every figure follows from the model.

    python benchmarks/warm_start.py [--seeds 10] [--budget 16]
"""

from __future__ import annotations

import argparse
import statistics

import optuna
from search_quality import SHAPES, WITHIN, Model, _row, spec_for

from kernelsweep.search.study import ShapeSearch
from kernelsweep.sweepspec.blocks import SearchTarget, point_check
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.tuned.warm import seeds

WARM = 2  # SearchSettings.warm_start's default


def ranked_grid(model: Model, grid: dict) -> list[tuple[float, dict]]:
    """Every configuration of the grid with its noiseless latency, fastest first."""
    points = expand_spec(spec_for(grid, None)).points
    return sorted(((model.latency(p), dict(p.tunables)) for p in points), key=lambda pair: pair[0])


def stored(model: Model, grid: dict) -> dict:
    """The entry an earlier search of this shape would have left: its best and runner-up."""
    (_, best), (_, second) = ranked_grid(model, grid)[:2]
    shape = ",".join(f"{k}={v[0]}" for k, v in grid.items())
    key = {"kernel": "matmul", "shape": shape, "dtype": "bfloat16", "platform": "trn2", "lnc": 2}
    return {"key": key | {"sdk": {"compiler": "2.21"}}, "best": {"tunables": best}, "runner_up": {"tunables": second}}


def trials_to_mark(model: Model, grid: dict, budget: int, seed: int, warm: list[dict], mark: float) -> int:
    spec = spec_for(grid, {"budget": budget, "seed": seed})
    target = next(iter(expand_spec(spec).targets))
    assert isinstance(target, SearchTarget)
    search = ShapeSearch.open(target, optuna.storages.InMemoryStorage(), point_check(spec, target))
    search.seed(warm)
    n = 0
    while batch := search.propose(2):
        for point in batch:
            n += 1
            search.record(point, _row(point, model.noisy_median(point, seed)))
            if model.latency(point) <= mark:
                return n
    return budget + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=16)
    args = parser.parse_args()
    model = Model()
    totals: dict[str, list[int]] = {"cold": [], "warm": []}
    for grid in SHAPES:
        best = ranked_grid(model, grid)[0][0]
        neighbours = [{**grid, "M": [grid["M"][0] * f]} for f in (0.5, 2)]
        entries = [stored(model, {k: [int(v[0])] for k, v in g.items()}) for g in neighbours]
        target = next(iter(expand_spec(spec_for(grid, {"budget": 1})).targets)).point
        warm = seeds(entries, target, WARM)
        shape = ",".join(f"{k}={v[0]}" for k, v in grid.items())
        for mode, first in (("cold", []), ("warm", warm)):
            runs = [trials_to_mark(model, grid, args.budget, s, first, best * (1 + WITHIN)) for s in range(args.seeds)]
            totals[mode] += runs
            print(f"{shape} {mode}: trials to within {WITHIN:.0%}: median {statistics.median(runs)}, {runs}")
    for mode, runs in totals.items():
        missed = sum(r > args.budget for r in runs)
        print(
            f"{mode}: median {statistics.median(runs)} trials, mean {statistics.fmean(runs):.1f} "
            f"over {len(runs)} searches (budget {args.budget}; {missed} never reached it)"
        )


if __name__ == "__main__":
    main()
