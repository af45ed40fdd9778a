"""The simulated tools' CPU per point of a zero-latency sweep, and how many tools a point launches.

    python benchmarks/tools_per_point.py [--rounds 3] [SPEC]    # SPEC: examples/quickstart.toml

The spec's points (its capture settings, its platforms) go through the production context and the
five stage functions in this process, one point at a time, on the simulated toolchain with nothing
slept (KERNELSWEEP_SIM_TIME_SCALE=0). The CPU is the waited-for children's (RUSAGE_CHILDREN): every
tool process, its interpreter's start and exit, and whatever it started. The run's set-up (the
version probes and the device listing, once per run) is printed apart. Each round starts from an
empty simulator state and artifact store, so every point traces, compiles and captures afresh.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from sweep_child import run_point
from toolcost import children_cpu

from kernelsweep.context import Locations, prepare
from kernelsweep.expansion import expand
from kernelsweep.spec import load_spec
from kernelsweep.toolchain.process import ToolResult, recording

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart.toml"


def _tool(run: ToolResult) -> str:
    """The tool and its subcommand (`neuron_explorer capture`), or which worker."""
    argv = run.argv
    if argv[1:2] == ["-c"]:
        return "trace worker" if "tracing.worker" in argv[2] else "benchmark worker"
    if argv[1:3] == ["-P", "-m"]:
        return " ".join([argv[3].rsplit(".", 1)[-1], *argv[4:5]])
    return Path(argv[0]).name


def one_round(spec_path: Path, root: Path) -> tuple[float, float, int, int, Counter[str]]:
    """Set-up CPU, the points' CPU, the set-up's launches, the points' count and the points' launches by tool."""
    spec = load_spec(spec_path).model_copy(
        update={"toolchain": "sim", "results": str(root / "results"), "artifacts": str(root / "artifacts")}
    )
    points = expand(spec, str(spec_path))
    before = children_cpu()
    with recording() as setup_runs:
        ctx, _ = prepare(spec, Locations(sim_state_dir=root / "sim", lock_dir=root / "locks"))
    setup_cpu, before = children_cpu() - before, children_cpu()
    with recording() as runs:
        failed = [record for record in (run_point(ctx, p) for p in points) if record.error is not None]
    points_cpu = children_cpu() - before
    if failed:
        raise SystemExit(f"{len(failed)} of {len(points)} points failed, first: {failed[0].error}")
    return setup_cpu, points_cpu, len(setup_runs), len(points), Counter(_tool(run) for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path, default=QUICKSTART)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["KERNELSWEEP_SIM_TIME_SCALE"] = "0"  # the tools inherit it: nothing modelled is slept
    per_point = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="kernelsweep-tools-per-point-") as tmp:
            setup_cpu, points_cpu, setup_launches, points, launches = one_round(args.spec, Path(tmp))
        per_point.append(points_cpu / points)
        print(
            f"round {i + 1}: {points} points, {points_cpu / points:.3f} CPU-s / point, "
            f"{launches.total() / points:.2f} launches / point; set-up {setup_cpu:.2f} CPU-s, {setup_launches} launches"
        )
    tools = ", ".join(f"{name} {count / points:.2f}" for name, count in sorted(launches.items()))
    print(f"launches per point by tool: {tools}")
    print(
        f"simulated tools' CPU per point ({args.spec.name}, zero latency): median {statistics.median(per_point):.3f} "
        f"CPU-s over {args.rounds} rounds (min {min(per_point):.3f}, max {max(per_point):.3f}); "
        f"1-minute load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
