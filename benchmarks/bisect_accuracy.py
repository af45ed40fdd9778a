"""How often `kernelsweep bisect` names the right culprit, and at what cost (issue 37): seeded trials
on the simulator at its default noise (1% run-level), each a fresh results folder, artifact store and
simulated device, the culprit's place drawn from the trial's seed.

* builds: 16 SDK builds (compiler versions 2.20 ... 2.35); KERNELSWEEP_SIM_CULPRIT_BUILD makes one of
  them and every later one FACTOR as slow for the point.
* commits: a kernel's history of 20 commits (kernelsweep.sim.kernel_history); from the culprit commit
  on, the kernel stores each tile twice (real code, traced and timed by the simulator).

Each trial runs the same code as the command (kernelsweep.bisect.run.bisect, every run through the
sweep's stages). Printed per trial: the culprit, what was found, decided steps against log2(N) + 2,
runs (each `--repeats` captures), the tools' modelled seconds (what the simulator was told they take;
time scale 0, so none is slept) and CPU seconds.

* two: both at once, 16 builds x 20 commits with a culprit on each (the culprit build slows the
  history's kernel): the two corners (bad build x good commit, good build x bad commit) say which axes
  hold a culprit, then each is bisected with the other at its good end.

With `--rounds N` the ends and each midpoint are decided on up to N rounds captured in turn on one core
(good end, midpoint, bad end) instead of on runs; each position still has one run (its NEFF, its row).
`captures` counts every profiled capture: runs x `--repeats`, plus each round's captures.

    python benchmarks/bisect_accuracy.py [--axis builds|commits|one|two] [--trials 20] [--factor 1.1] [--rounds 12]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import tempfile
from pathlib import Path

from kernelsweep.bisect.axis import builds_axis, commits_axis
from kernelsweep.bisect.run import Question, bisect, bisect_both
from kernelsweep.bisect.store import BisectJournal
from kernelsweep.report.stats import Rule
from kernelsweep.sim.kernel_history import KERNEL_REF, SHAPE, write_history
from kernelsweep.sim.latency import read_latencies

BUILDS = tuple(f"2.{minor}.0" for minor in range(20, 36))  # 16 builds in release order
COMMITS = 20
BUILD_SHAPE = {"n": [1048576], "free_size": [512]}


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _sim_env(state: Path, seed: str) -> None:
    os.environ.update(
        KERNELSWEEP_STATE_DIR=str(state),
        KERNELSWEEP_SIM_STATE=str(state / "sim"),
        KERNELSWEEP_SIM_NOISE_SEED=seed,
        KERNELSWEEP_SIM_TIME_SCALE="0",
    )


def _history_grid() -> dict[str, list[int]]:
    return {axis_name: [int(v)] for axis_name, v in (t.split("=") for t in SHAPE.split(","))}


def _spec_data(folder: Path, kernel: str, grid: dict[str, list[int]], repeats: int) -> dict:
    return {
        "name": "bisect",
        "platforms": ["trn2"],
        "kernels": [{"kernel": kernel, "grid": grid}],
        "capture": {"repeats": repeats},
        "toolchain": "sim",
        "artifacts": str(folder / "artifacts"),
        "results": str(folder / "results"),
    }


def captures(journal: BisectJournal, repeats: int) -> int:
    """Every profiled capture the bisection's decisions rest on: its runs' repeats and its rounds'."""
    return len(journal.doc["runs"]) * repeats + sum(len(done["at"]) for done in journal.doc.get("rounds", []))


def trial(axis_kind: str, seed: int, factor: float, repeats: int, folder: Path, rounds: int = 0) -> dict:
    from kernelsweep.flows.settings import locations_from_env

    rng = random.Random(f"{axis_kind}:{seed}")
    n = len(BUILDS) if axis_kind == "builds" else COMMITS
    culprit = rng.randrange(1, n)
    state = folder / "state"
    _sim_env(state, f"bisect-{axis_kind}-{seed}")
    if axis_kind == "builds":
        os.environ["KERNELSWEEP_SIM_CULPRIT_BUILD"] = f"{BUILDS[culprit]}@vector_add:{factor:g}"
        axis, kernel, grid = builds_axis(BUILDS, None, None), "vector_add", BUILD_SHAPE
    else:
        os.environ.pop("KERNELSWEEP_SIM_CULPRIT_BUILD", None)
        hashes = write_history(folder / "repo", COMMITS, culprit)
        axis, kernel, grid = commits_axis(folder / "repo", hashes[0], hashes[-1]), KERNEL_REF, _history_grid()
    data = _spec_data(folder, kernel, grid, repeats)
    before = cpu_seconds()
    outcome, journal, runs = bisect(Question(data, axis, Rule(), 6, rounds=rounds), locations_from_env())
    modelled = sum(lat.modelled_seconds for lat in read_latencies(state / "sim"))
    return {
        "n": n,
        "culprit": culprit,
        "found": outcome.bad if outcome.status == "found" else None,
        "status": outcome.status,
        "decided": outcome.decided_steps,
        "runs": runs,
        "captures": captures(journal, repeats),
        "modelled": modelled,
        "cpu": cpu_seconds() - before,
    }


def two_axes_trial(seed: int, factor: float, repeats: int, folder: Path, rounds: int = 0) -> dict:
    """16 builds x 20 commits, a culprit on each: the corners say which axes hold one, each is bisected."""
    from kernelsweep.flows.settings import locations_from_env

    rng = random.Random(f"two:{seed}")
    culprits = rng.randrange(1, len(BUILDS)), rng.randrange(1, COMMITS)
    _sim_env(folder / "state", f"bisect-two-{seed}")
    os.environ["KERNELSWEEP_SIM_CULPRIT_BUILD"] = f"{BUILDS[culprits[0]]}@{KERNEL_REF.split(':')[1]}:{factor:g}"
    hashes = write_history(folder / "repo", COMMITS, culprits[1])
    axes = builds_axis(BUILDS, None, None), commits_axis(folder / "repo", hashes[0], hashes[-1])
    data = _spec_data(folder, KERNEL_REF, _history_grid(), repeats)
    before = cpu_seconds()
    both, journal, runs = bisect_both(Question(data, axes[0], Rule(), 6, axes[1], rounds), locations_from_env())
    outcomes = (both.first, both.second)
    return {
        "culprits": culprits,
        "found": tuple(o.bad if o.status == "found" else None for o in outcomes),
        "decided": tuple(o.decided_steps for o in outcomes),
        "runs": runs,
        "captures": captures(journal, repeats),
        "modelled": sum(lat.modelled_seconds for lat in read_latencies(folder / "state" / "sim")),
        "cpu": cpu_seconds() - before,
    }


def two_axes(trials: int, factor: float, repeats: int, rounds: int) -> None:
    bounds = math.log2(len(BUILDS)) + 2, math.log2(COMMITS) + 2
    print(f"two axes: {trials} trials, {len(BUILDS)} builds (culprit x{factor:g}) x {COMMITS} commits (culprit stores "
          f"twice), {repeats} captures a run, bounds {bounds[0]:.2f} and {bounds[1]:.2f} decided steps")  # fmt: skip
    print("trial  build(culprit found decided)  commit(culprit found decided)  runs  captures  modelled_s  cpu_s")
    results = []
    for seed in range(trials):
        with tempfile.TemporaryDirectory(prefix="bisect-accuracy-") as folder:
            r = two_axes_trial(seed, factor, repeats, Path(folder), rounds)
        results.append(r)
        cells = [f"{r['culprits'][i]:7d} {'-' if r['found'][i] is None else r['found'][i]:>5} {r['decided'][i]:7d}"
                 for i in (0, 1)]  # fmt: skip
        print(f"{seed:5d}  {cells[0]:>28}  {cells[1]:>29} {r['runs']:5d} {r['captures']:9d} "
              f"{r['modelled']:11.1f} {r['cpu']:6.1f}", flush=True)  # fmt: skip
    right = sum(r["found"] == r["culprits"] for r in results)
    worst = [max(r["decided"][i] for r in results) for i in (0, 1)]
    within = all(w <= b for w, b in zip(worst, bounds, strict=True))
    print(
        f"two axes: both right {right}/{len(results)}; decided steps max {worst[0]} builds, {worst[1]} commits "
        f"({'within' if within else 'OVER'} the bounds); runs {sum(r['runs'] for r in results)} (mean "
        f"{sum(r['runs'] for r in results) / len(results):.1f}, {repeats} captures each); captures "
        f"{sum(r['captures'] for r in results)}; modelled "
        f"{sum(r['modelled'] for r in results):.0f} s; cpu {sum(r['cpu'] for r in results):.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    axes = ("builds", "commits", "one", "two")
    parser.add_argument("--axis", choices=axes, default="two", help="builds, commits, one (each), two (together)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--factor", type=float, default=1.1, help="the culprit build's slowdown (builds axis)")
    parser.add_argument("--repeats", type=int, default=2, help="profiled captures per run")
    parser.add_argument("--rounds", type=int, default=0, help="decide on up to this many interleaved rounds (0: runs)")
    args = parser.parse_args()
    decided_on = f"up to {args.rounds} interleaved rounds a judgement" if args.rounds else "runs, up to 6 a position"
    print(f"steps decided on {decided_on}")
    if args.axis == "two":
        two_axes(args.trials, args.factor, args.repeats, args.rounds)
        return
    for axis_kind in ("builds", "commits") if args.axis == "one" else (args.axis,):
        bound = math.log2(len(BUILDS) if axis_kind == "builds" else COMMITS) + 2
        what = f"culprit x{args.factor:g}" if axis_kind == "builds" else "culprit stores twice"
        print(f"{axis_kind}: {args.trials} trials, {what}, {args.repeats} captures a run, bound {bound:.2f} steps")
        print("trial  N  culprit  found  status     decided  runs  captures  modelled_s  cpu_s")
        results = []
        for seed in range(args.trials):
            with tempfile.TemporaryDirectory(prefix="bisect-accuracy-") as folder:
                r = trial(axis_kind, seed, args.factor, args.repeats, Path(folder), args.rounds)
            results.append(r)
            found = "-" if r["found"] is None else r["found"]
            print(f"{seed:5d} {r['n']:2d} {r['culprit']:8d} {found:>6} {r['status']:10s} {r['decided']:7d} "
                  f"{r['runs']:5d} {r['captures']:9d} {r['modelled']:11.1f} {r['cpu']:6.1f}", flush=True)  # fmt: skip
        right = sum(r["found"] == r["culprit"] for r in results)
        worst = max(r["decided"] for r in results)
        print(
            f"{axis_kind}: right {right}/{len(results)}; decided steps max {worst} (bound {bound:.2f}: "
            f"{'within' if worst <= bound else 'OVER'}); runs {sum(r['runs'] for r in results)} "
            f"(mean {sum(r['runs'] for r in results) / len(results):.1f}); captures "
            f"{sum(r['captures'] for r in results)}; modelled "
            f"{sum(r['modelled'] for r in results):.0f} s; cpu {sum(r['cpu'] for r in results):.0f} s"
        )


if __name__ == "__main__":
    main()
