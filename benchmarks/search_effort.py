"""Tuning time against quality for the three effort levels (issue 36, item 7): docs/tuning.md's figures.

Each effort level (and the same level with early dropping off, `drop_after = 0`) runs the real search
code (kernelsweep.search.study.ShapeSearch with the level's budget, captures per trial and drop bar;
Optuna's seeded TPE, two trials at a time) on benchmarks/search_quality.py's three matmul shapes over
seeds. Each trial's captures are drawn from the simulator's model: the noiseless modelled latency with
the simulator's per-capture jitter (1%) and a run shift per trial (its default run noise, 1%, which the
drop rule cannot see). A trial with a drop bar is judged after its first captures by the same code the
capture stage calls (kernelsweep.search.dropping.losing) and, when dropped, keeps only those.

Tuning time is the device time of the captures, as the simulator models a capture: its NEFF load
(sim.capture.LOAD_SECONDS) plus num_exec (10, the default) executions at the modelled latency; not a
clock. Quality is the noiseless latency of the configuration the search ranks best (lowest told
median) over the grid's best. The default level's captures are the documented search example's 3.

    python benchmarks/search_effort.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, replace

import optuna
from search_quality import SHAPES, WITHIN, Model, _row, grid_best, spec_for

from kernelsweep.search.dropping import losing
from kernelsweep.search.study import ShapeSearch
from kernelsweep.sim.capture import LOAD_SECONDS
from kernelsweep.sim.config import DEFAULT_RUN_NOISE
from kernelsweep.sim.model import predict, unit_normal
from kernelsweep.sweepspec.blocks import SearchTarget, point_check
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.point import Point

SPEC_REPEATS = 3  # capture.repeats of the documented search example: the default level's captures
NUM_EXEC = 10  # CaptureSettings.num_exec's default
BATCH = 2
LEVELS = (
    ("quick", {"effort": "quick"}),
    ("quick, no drop", {"effort": "quick", "drop_after": 0}),
    ("default", {}),
    ("thorough", {"effort": "thorough"}),
    ("thorough, no drop", {"effort": "thorough", "drop_after": 0}),
)


@dataclass(frozen=True)
class Search:
    ratio: float  # the chosen configuration's noiseless latency over the grid's best
    device_seconds: float
    trials: int
    captures: int
    dropped: int


def captures(model: Model, point: Point, seed: int) -> tuple[list[float], float]:
    """The trial's captures' latencies (us), dropped early when its bar says so, and their device seconds."""
    w = model.workload(point)
    run = 1 + DEFAULT_RUN_NOISE * unit_normal(f"{seed}:{point.point_id}:run")
    wanted = point.repeats or SPEC_REPEATS
    drawn = [predict(w, jitter_key=f"{seed}:{point.point_id}:{i}", run_factor=run).total * 1e6 for i in range(wanted)]
    if point.drop is not None and point.drop.after < wanted and losing(point.drop, drawn[: point.drop.after]):
        drawn = drawn[: point.drop.after]
    return drawn, len(drawn) * (LOAD_SECONDS + NUM_EXEC * model.latency(point) * 1e-6)


def search_once(model: Model, grid: dict, search: dict, seed: int, best: float) -> Search:
    spec = spec_for(grid, {**search, "seed": seed})
    target = next(iter(expand_spec(spec).targets))
    assert isinstance(target, SearchTarget)
    study = ShapeSearch.open(target, optuna.storages.InMemoryStorage(), point_check(spec, target))
    told: list[tuple[float, Point]] = []
    seconds, taken, dropped = 0.0, 0, 0
    while batch := study.propose(BATCH):
        for point in batch:
            drawn, spent = captures(model, point, seed)
            seconds, taken = seconds + spent, taken + len(drawn)
            dropped += len(drawn) < (point.repeats or SPEC_REPEATS)
            study.record(point, replace(_row(point, statistics.median(drawn)), latencies_us=drawn, repeats=len(drawn)))
            told.append((statistics.median(drawn), point))
    chosen = min(told, key=lambda pair: pair[0])[1]
    return Search(model.latency(chosen) / best, seconds, len(told), taken, dropped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    model = Model()
    bests = [grid_best(model, grid)[0] for grid in SHAPES]
    print(f"{len(SHAPES)} shapes x {args.seeds} seeds; device time as modelled (load {LOAD_SECONDS} s + "
          f"{NUM_EXEC} executions per capture); the default level at {SPEC_REPEATS} captures a trial")  # fmt: skip
    print("| effort | trials | captures | dropped trials | device time per search | within 5% | found / best |")
    print("|---|---|---|---|---|---|---|")
    for name, search in LEVELS:
        runs = [
            search_once(model, grid, search, seed, best)
            for grid, best in zip(SHAPES, bests, strict=True)
            for seed in range(args.seeds)
        ]
        hits = sum(r.ratio <= 1 + WITHIN for r in runs)
        mean = {f: statistics.mean(getattr(r, f) for r in runs) for f in ("trials", "captures", "dropped")}
        seconds = statistics.mean(r.device_seconds for r in runs)
        print(
            f"| {name} | {mean['trials']:.1f} | {mean['captures']:.1f} | {mean['dropped']:.1f} | {seconds:.1f} s "
            f"| {hits}/{len(runs)} | median {statistics.median(r.ratio for r in runs):.3f}, "
            f"worst {max(r.ratio for r in runs):.3f} |"
        )


if __name__ == "__main__":
    main()
