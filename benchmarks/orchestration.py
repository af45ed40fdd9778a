"""Orchestration CPU per point, this checkout beside an older commit, in one run:

    python benchmarks/orchestration.py                   # against BASE_COMMIT, 64 points, 2 rounds
    python benchmarks/orchestration.py --base main --points 128 --rounds 3

"Orchestration" is the sweep process's own CPU (Prefect's client and our code, not the tool processes
and not the Prefect server) at zero modelled tool latency, less the correctness arithmetic (building
the inputs and the float64 reference, measured apart, the same in both trees): target this checkout
<= 0.5 x the base. Both trees run `benchmarks/sweep_child.py flow` (each its own copy, as
`kernelsweep run` runs a sweep) against one Prefect server, alternately, so a change in the machine's
load falls on both. The base tree is `git archive`d into a temporary folder and imported in place of
this one by pointing the editable install's package map at it (so the venv must hold an editable
install: `pip install -e .`). Both trees' packages are compiled to bytecode first, as an installed
package is: on a machine that sets PYTHONDONTWRITEBYTECODE the exported tree would otherwise compile its
modules from source in every run, a cost no user's run pays. Both children start with Prefect imported
and started (`prefect.main`: its logging configured), as a worker's flow run process is; `import
prefect` alone is lazy and would leave that start inside the measured window. Printed beside each
figure: the load average, and the part of the run's CPU that is importing modules (the flow's own, and
pandas and fastapi, which pyarrow's conversion of the rows and Prefect's serialisation of the flow's
parameters import): paid once per run, not per point.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from guard import load
from servers import prefect_server, settle
from throughput import correctness_arithmetic_ms, fresh, user_env, warm_up
from workloads import HERE, Host, mlp_spec

BASE_COMMIT = "767f644"  # the code before issue 39's cuts
TARGET_RATIO = 0.5
ROOT = HERE.parent
PACKAGES = ("kernelsweep", "flows", "tasks")  # the folders the package map imports from
# Run a script with the `kernelsweep` packages of TREE instead of this checkout's: argv is TREE SCRIPT ARGS...
_LAUNCHER = """import runpy, sys
from pathlib import Path
tree, here, script = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
for finder in sys.meta_path:
    table = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
    if isinstance(table, dict) and "kernelsweep" in table:
        table.update({name: path.replace(here, str(tree), 1) for name, path in table.items()})
        break
else:
    sys.exit("kernelsweep is not an editable install here: `pip install -e .`, then run this again")
import kernelsweep
import prefect.main  # Prefect started (its logging configured), as a worker's flow run process has it: both trees
if not Path(kernelsweep.__file__).is_relative_to(tree):
    sys.exit(f"kernelsweep was imported from {kernelsweep.__file__}, not from {tree}")
sys.argv, sys.path[0] = [script, *sys.argv[4:]], str(Path(script).parent)
runpy.run_path(script, run_name="__main__")
"""
_IMPORTS = """import resource, prefect
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
started = cpu()
import kernelsweep.flows.embedded, kernelsweep.flows.progress, kernelsweep.flows.sweep
import fastapi, pandas  # Prefect's parameter serialisation and pyarrow's row conversion import them in the run
print(cpu() - started)
"""


def export(commit: str, into: Path) -> Path:
    """The commit's tree as plain files (no worktree, no change to the repository)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def compiled(tree: Path) -> Path:
    """The tree with its packages' bytecode written (compileall writes it whatever the environment says)."""
    packages = [str(tree / name) for name in PACKAGES if (tree / name).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, stdout=subprocess.DEVNULL)
    return tree


def in_tree(tree: Path, script: Path, *args: str) -> list[str]:
    # -P: run from the repository, `-c` would put it first on the path and import this tree's package
    return [sys.executable, "-P", "-c", _LAUNCHER, str(tree), str(ROOT), str(script), *args]


def import_seconds(tree: Path, env: dict[str, str], folder: Path) -> float:
    """CPU seconds of importing the modules a sweep child imports, once, inside its measured window."""
    script = folder / "import_cost.py"
    script.write_text(_IMPORTS)
    done = subprocess.run(in_tree(tree, script), env=env, capture_output=True, text=True, check=True)
    return float(done.stdout)


def sweep_cpu(tree: Path, root: Path, points: int, host: Host, env: dict[str, str]) -> dict:
    """One zero-latency sweep by the tree's own sweep child; its figures."""
    spec = mlp_spec(points, root, host.compile_slots)
    job, out = root / "job.json", root / "out.json"
    job.write_text(json.dumps({"spec": spec.model_dump(mode="json"), "out": str(out), "shard": None}))
    child = in_tree(tree, tree / "benchmarks" / "sweep_child.py", "flow", str(job))
    with (root / "child.log").open("w") as log:
        code = subprocess.run(child, env={**env, **host.env(root)}, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    if code.returncode != 0 or not out.is_file():
        sys.exit(f"the sweep child of {tree} exited {code.returncode}; see {root / 'child.log'}")
    figures = json.loads(out.read_text())
    if figures["failed"]:
        sys.exit(f"{figures['failed']} of {points} points failed in {tree}; see {root}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=BASE_COMMIT, help="the commit to compare with (default: %(default)s)")
    parser.add_argument("--points", type=int, default=64, help="zero-latency MLP points per sweep (4 x a power of 2)")
    parser.add_argument("--rounds", type=int, default=2, help="sweeps per tree, alternating")
    args = parser.parse_args()
    print(
        f"orchestration CPU per point, {args.points} zero-latency points, {args.rounds} rounds; at the start: {load()}"
    )
    with tempfile.TemporaryDirectory(prefix="kernelsweep-orchestration-") as folder:
        arithmetic, cpu, imports = measure(args.base, args.points, args.rounds, Path(folder))
    print(
        f"\n  correctness arithmetic (inputs + float64 reference, the same code in both): {arithmetic:.0f} ms / point"
    )
    print(f"  {'ms / point (median of rounds)':<34} {'whole':>7} {'- arithmetic':>13} {'- imports too':>14}")
    per_point = {}
    for name in cpu:
        whole = statistics.median(cpu[name]) / args.points * 1000
        per_point[name] = whole - arithmetic
        once = imports[name] / args.points * 1000
        print(f"  {name:<34} {whole:7.0f} {per_point[name]:13.0f} {per_point[name] - once:14.0f}"
              f"   (imports {imports[name]:.2f} CPU-s once per run)")  # fmt: skip
    old, new = per_point.values()
    print(f"  this checkout / base, without the arithmetic: {new / old:.2f} (target <= {TARGET_RATIO}); {load()}")


def measure(
    commit: str, points: int, rounds: int, base: Path
) -> tuple[float, dict[str, list[float]], dict[str, float]]:
    """The arithmetic's ms a point; each tree's sweep CPU by round, and its imports' CPU."""
    host = Host(cores=4, compile_slots=2, time_scale=0.0)
    trees = {f"base {commit}": compiled(export(commit, base / "base-tree")), "this checkout": compiled(ROOT)}
    arithmetic = correctness_arithmetic_ms(mlp_spec(points, base / "arithmetic", host.compile_slots))
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    with prefect_server(base / "server") as server:
        env = {**user_env(), **server.client_env()}
        warm_up(base, server)
        imports = {name: import_seconds(tree, env, base) for name, tree in trees.items()}
        for round_ in range(rounds):
            for number, (name, tree) in enumerate(trees.items()):
                settle(server.cpu_seconds)  # the previous sweep's events are recorded before this one starts
                figures = sweep_cpu(tree, fresh(base, f"sweep-{round_}-{number}"), points, host, env)
                cpu[name].append(figures["self_cpu"])
                print(f"  round {round_ + 1}, {name}: {figures['self_cpu']:.2f} CPU-s in the sweep process, "
                      f"{figures['children_cpu']:.2f} in its tools; {load()}")  # fmt: skip
    return arithmetic, cpu, imports


if __name__ == "__main__":
    main()
