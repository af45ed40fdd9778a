"""How often a budgeted search finds a configuration within 5% of the grid's best, per shape, over
seeds: the rate docs/sweeps.md states for `search = { budget = 16 }` on the matmul.

The grid is every configuration of the matmul's tunables that the kernel's rules allow (the same
expansion `kernelsweep validate` does), each timed by the simulator's performance model from its own
simulated trace (kernelsweep.sim.tracer.payload, then sim.model.model_timing: TensorE passes, HBM
bytes its DMAs moved, DMA count), noiselessly: that is the check. The search is the real search code
(kernelsweep.search.study.ShapeSearch: Optuna's seeded TPE, pruning of dropped proposals, repeats
told their earlier value) told each trial's median of REPEATS noisy draws (sim.model.predict's 1%
per-repeat jitter), as the flow tells it a row; it proposes `--batch` trials at a time. A search
succeeds when the configuration it ranks best is, by the noiseless model, within 5% of the grid's
best. Nothing is measured against a clock: every figure follows from the configured model.

    python benchmarks/search_quality.py [--seeds 10] [--budget 16] [--batch 2] [--sampler tpe]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import optuna

from kernelsweep.kernels.matmul import matmul as MATMUL
from kernelsweep.platforms import PLATFORMS
from kernelsweep.results.rows import Row, row_id
from kernelsweep.search.study import ShapeSearch
from kernelsweep.sim.config import CURRENT_NKI
from kernelsweep.sim.model import CALIBRATION, Workload, model_timing, predict
from kernelsweep.sim.nki.generations import get_generation
from kernelsweep.sim.tracer import bound, payload
from kernelsweep.sim.views import workload
from kernelsweep.sweepspec.blocks import SearchTarget, point_check
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain.tracing.request import TraceRequest

SHAPES = (
    {"M": [512], "K": [1024], "N": [2048]},
    {"M": [2048], "K": [1024], "N": [2048]},
    {"M": [256], "K": [512], "N": [1024]},
)
REPEATS = 3  # capture.repeats of the documented search example
WITHIN = 0.05


@dataclass(frozen=True)
class Outcome:
    shape: str
    seed: int
    found_us: float
    best_us: float

    @property
    def ratio(self) -> float:
        return self.found_us / self.best_us


def spec_for(grid: dict, search: dict | None) -> SweepSpec:
    """Without a search: every configuration of the matmul's tunables (the grid); with one, its search."""
    block = {"kernel": "matmul", "dtypes": ["bfloat16"], "grid": grid}
    if search:
        block["search"] = search
    else:
        block["tunables"] = {name: list(values) for name, values in MATMUL.tunables.items()}
    return parse_spec({"name": "bench", "platforms": ["trn2"], "toolchain": "sim", "kernels": [block]})


class Model:
    """The noiseless modelled latency (us) of a point, traced once on the simulated NKI."""

    def __init__(self) -> None:
        self.definition = MATMUL
        self.generation = get_generation(CURRENT_NKI)
        self._workloads: dict[str, Workload] = {}

    def workload(self, point: Point) -> Workload:
        """Traced once per configuration: a search's trials are the grid's configurations again, and
        the simulated trace, not the search, is what this benchmark's time went into."""
        key = point.model_copy(update={"search_trial": None}).point_id
        if key not in self._workloads:
            request = TraceRequest.for_point(point, self.definition, point.platform)
            with tempfile.TemporaryDirectory() as folder:  # the point's tunables bound into the kernel, as tracers do
                found = payload(request, self.generation, "benchmark", bound(request, Path(folder)))
            self._workloads[key] = workload(found)
        return self._workloads[key]

    def latency(self, point: Point) -> float:
        w = self.workload(point)
        return model_timing(w, CALIBRATION[w.platform.name]).total * 1e6

    def noisy_median(self, point: Point, seed: int) -> float:
        w = self.workload(point)
        draws = [predict(w, jitter_key=f"{seed}:{point.point_id}:{i}").total * 1e6 for i in range(REPEATS)]
        return statistics.median(draws)


def grid_best(model: Model, grid: dict) -> tuple[float, int]:
    """(the grid's best noiseless latency, how many configurations the grid has)."""
    points = expand_spec(spec_for(grid, None)).points
    return min(model.latency(p) for p in points), len(points)


def search_once(model: Model, grid: dict, args: argparse.Namespace, seed: int) -> float:
    """The noiseless latency of the configuration one seeded search ranks best."""
    search_settings = {"budget": args.budget, "seed": seed, "sampler": args.sampler}
    spec = spec_for(grid, search_settings)
    target = next(iter(expand_spec(spec).targets))
    assert isinstance(target, SearchTarget)
    search = ShapeSearch.open(target, optuna.storages.InMemoryStorage(), point_check(spec, target))
    told: dict[str, tuple[float, Point]] = {}
    while batch := search.propose(args.batch):
        for point in batch:
            median = model.noisy_median(point, seed)
            search.record(point, _row(point, median))
            told[point.point_id] = (median, point)
    _, chosen = min(told.values(), key=lambda pair: pair[0])
    return model.latency(chosen)


def _row(point: Point, median: float) -> Row:
    return Row(
        row_id=row_id("bench", point), sweep="bench", kernel=point.kernel, kernel_ref=point.kernel_ref,
        shape=point.shape, params=point.params, dtype=point.dtype, platform=point.platform, lnc=point.lnc, seed=0,
        toolchain="sim", is_simulation=True, status="ok", flow_run_id="bench", latency_median_us=median,
        correct=True, tunables=point.tunables_text,
    )  # fmt: skip


def measure(args: argparse.Namespace) -> list[Outcome]:
    model, outcomes = Model(), []
    for grid in SHAPES:
        best, size = grid_best(model, grid)
        shape = ",".join(f"{k}={v[0]}" for k, v in grid.items())
        print(f"{shape}: grid of {size} configurations, best {best:.1f} us (modelled, trn2 LNC 2)")
        outcomes += [Outcome(shape, s, search_once(model, grid, args, s), best) for s in range(args.seeds)]
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2, help="trials proposed at once (the host's compile slots)")
    parser.add_argument("--sampler", choices=["tpe", "random"], default="tpe")
    args = parser.parse_args()
    assert PLATFORMS["trn2"].default_lnc == 2
    outcomes = measure(args)
    for shape in dict.fromkeys(o.shape for o in outcomes):
        mine = [o for o in outcomes if o.shape == shape]
        hits = sum(o.ratio <= 1 + WITHIN for o in mine)
        ratios = " ".join(f"{o.ratio:.3f}" for o in mine)
        print(f"{shape}: {hits}/{len(mine)} seeds within {WITHIN:.0%} of the grid's best (found / best: {ratios})")
    hits = sum(o.ratio <= 1 + WITHIN for o in outcomes)
    print(
        f"{args.sampler}, budget {args.budget}, batch {args.batch}: {hits}/{len(outcomes)} searches "
        f"({hits / len(outcomes):.0%}) within {WITHIN:.0%} of the grid's best"
    )


if __name__ == "__main__":
    main()
