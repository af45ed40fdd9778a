"""The simulated tools' CPU per point of a zero-latency sweep, and how many tools a point launches.

    python benchmarks/tools_per_point.py [--rounds 3] [SPEC]    # SPEC: examples/quickstart.toml
    python benchmarks/tools_per_point.py --mlp 64               # the cost benchmark's MLP points

The spec's points (its capture settings, its platforms) go through the production context and the
five stage functions in this process, one point and one stage at a time, on the simulated toolchain with nothing
slept (KERNELSWEEP_SIM_TIME_SCALE=0). The CPU is the waited-for children's (RUSAGE_CHILDREN): every
tool process, its interpreter's start and exit, and whatever it started, split by the stage that
ran it (trace: the trace worker; capture: the capture; extract: the views). The run's set-up (the
version probes and the device listing, once per run) is printed apart. Each round starts from an
empty simulator state and artifact store, so every point traces, compiles and captures afresh.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from toolcost import children_cpu
from workloads import mlp_spec

from kernelsweep import stages
from kernelsweep.sim.config import sim_env
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.load import load_spec
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import Locations, prepare
from kernelsweep.toolchain.prefork_client import entry_point
from kernelsweep.toolchain.process import ToolResult, recording

T = TypeVar("T")
STAGES = ("trace", "compile", "inputs", "capture", "extract")
WORKERS = {
    "kernelsweep.toolchain.tracing.worker": "trace worker",
    "kernelsweep.toolchain.iteration_worker": "benchmark worker",
}


@dataclass
class Round:
    setup_cpu: float
    setup_launches: int
    points: int
    stage_cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    launches: Counter[str] = field(default_factory=Counter)

    @property
    def per_point(self) -> float:
        return sum(self.stage_cpu.values()) / self.points


QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart.toml"


def _tool(run: ToolResult) -> str:
    """The tool and its subcommand (`neuron_explorer capture`), or which worker."""
    argv = run.argv
    if argv[1:2] == ["-c"]:
        return "trace worker" if "tracing.worker" in argv[2] else "benchmark worker"
    entry = entry_point(argv)
    if entry is None:
        return Path(argv[0]).name
    module, args = entry
    return WORKERS.get(module) or " ".join([module.rsplit(".", 1)[-1], *args[:1]])


def _spec(args: argparse.Namespace, root: Path) -> tuple[SweepSpec, list[Point]]:
    if args.mlp:
        spec = mlp_spec(args.mlp, root, compile_slots=1)
    else:
        spec = load_spec(args.spec)
    spec = spec.model_copy(
        update={"toolchain": "sim", "results": str(root / "results"), "artifacts": str(root / "artifacts")}
    )
    return spec, expand(spec)


def one_round(spec: SweepSpec, points: list[Point], root: Path) -> Round:
    """The run's set-up, then each point's five stages one after another, each stage's children's CPU apart."""
    before = children_cpu()
    with recording() as setup_runs:
        ctx, _ = prepare(spec, Locations(sim_state_dir=root / "sim", lock_dir=root / "locks"))
    found = Round(setup_cpu=children_cpu() - before, setup_launches=len(setup_runs), points=len(points))

    def measured(name: str, stage: Callable[..., T], *args: object) -> T:
        before = children_cpu()
        try:
            return stage(ctx, *args)
        finally:
            found.stage_cpu[name] += children_cpu() - before

    with recording() as runs:
        for point in points:
            traced = measured("trace", stages.trace_stage, point)
            compiled = measured("compile", stages.compile_stage, point, traced)
            inputs = measured("inputs", stages.inputs_stage, point)
            captured = measured("capture", stages.capture_stage, point, compiled, inputs)
            measured("extract", stages.extract_stage, point, compiled, inputs, captured)
    found.launches.update(_tool(run) for run in runs)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path, default=QUICKSTART)
    parser.add_argument("--mlp", type=int, metavar="N", help="the cost benchmark's N MLP points instead of a spec")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ |= sim_env(time_scale=0.0)  # the tools inherit it: nothing modelled is slept
    rounds = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="kernelsweep-tools-per-point-") as tmp:
            spec, points = _spec(args, Path(tmp))
            found = one_round(spec, points, Path(tmp))
        rounds.append(found)
        by_stage = ", ".join(f"{k} {v / found.points:.3f}" for k, v in found.stage_cpu.items() if v)
        print(
            f"round {i + 1}: {found.points} points, {found.per_point:.3f} CPU-s / point ({by_stage}), "
            f"{found.launches.total() / found.points:.2f} launches / point; set-up {found.setup_cpu:.2f} CPU-s, "
            f"{found.setup_launches} launches"
        )
    last = rounds[-1]
    by_tool = ", ".join(f"{k} {v / last.points:.2f}" for k, v in sorted(last.launches.items()))
    print(f"launches per point by tool: {by_tool}")
    per_point = [r.per_point for r in rounds]
    workload = f"{args.mlp} MLP points" if args.mlp else args.spec.name
    print(
        f"simulated tools' CPU per point ({workload}, zero latency): median {statistics.median(per_point):.3f} "
        f"CPU-s over {args.rounds} rounds (min {min(per_point):.3f}, max {max(per_point):.3f}); "
        f"1-minute load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
