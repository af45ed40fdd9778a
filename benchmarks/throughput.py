"""Sweep throughput and cost on the simulated toolchain, each figure next to its target.

    python benchmarks/throughput.py                 # everything; about an hour on 2 cores
    python benchmarks/throughput.py --only cost     # one section: tools, cost, first, throughput, big, fleet

Sections:
  tools       CPU per simulated tool call (target <= 60 ms), as this environment runs them and with
              bytecode caches (this machine may set PYTHONDONTWRITEBYTECODE)
  cost        CPU per point at zero tool latency, split per process: tool processes, Prefect client,
              Prefect server (a separate `prefect server start`, read from /proc), our own code
              (the same points through the same stages without Prefect); target client + server +
              ours <= 100 ms. Beside it, Prefect's floor (five no-op tasks per point,
              with the stage tasks' options). Database bytes
              per point on SQLite and on PostgreSQL (with PostgreSQL's own CPU)
  first       time to the first point of `kernelsweep run`: the run's own Prefect server on a fresh
              and on a used Prefect home, and a running `kernelsweep server`
  throughput  wall time against the lower bound (target <= 1.05, issue 39; was 1.15) at each --points, 4 simulated
              cores and 2 compile slots, and the speedup over seed 000's sequential method
              (target >= 2.5x) at --baseline-points
  big         a 64-core, 48-slot host at --big-scale (target wall / bound <= 1.2), run as
              --big-flow-runs shard flow runs at once
  fleet       one Prefect server on PostgreSQL fed by each of --fleet-hosts simulated hosts at once
              (--fleet-points zero-latency points each), then Prefect's multi-server setup (two API
              processes, one services process, Redis): server CPU per point by process and the points
              per second one server core sustains (benchmarks/fleetscale.py; needs Debian's
              postgresql and redis-server)

Children run with the Prefect settings of the command they stand for: `kernelsweep run`'s
(Prefect at CRITICAL, nothing logged to the API) for the single-host sweeps and Prefect's floor, the
fleet worker unit's for shards. Every ratio is printed with the load average it was taken at, and
no verdict is given while the 1-minute load exceeds the CPU count (benchmarks/guard.py).

The bound is computed from what the simulator was configured to sleep (its records, sim.latency),
never from times the run measured: max(C / slots + min P, min C + P / cores) per flow run, summed
over flow runs that run one after another. Every sweep runs in a child process against a Prefect
server the benchmark starts (benchmarks/servers.py), so each process's CPU is its own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fleetscale import section_fleet
from guard import load, verdict
from servers import PREFECT_DEFAULT_RECORDING, Server, postgres, prefect_server, settle
from toolcost import TARGET_MS, tool_costs
from workloads import Host, bound, mlp_spec, run_child, shards, start_child, worker_env

from kernelsweep.flows.cli.run import QUIET_PREFECT
from kernelsweep.flows.server import free_port
from kernelsweep.kernels import load_kernel
from kernelsweep.sim.latency import read_latencies
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.models import SweepSpec

SECTIONS = ("tools", "cost", "first", "throughput", "big", "fleet")
COST_TARGET_MS = 100.0
RATIO_TARGET, SPEEDUP_TARGET, BIG_RATIO_TARGET = 1.05, 2.5, 1.2  # issue 39: one host within 5% of its bound
BENCH_HOST = Host(cores=4, compile_slots=2, time_scale=0.5)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_"))}


def user_env() -> dict[str, str]:
    """What a child runs with: the environment `kernelsweep run` gives itself (Prefect at CRITICAL,
    nothing logged to the API), so the figures are what a user's run costs."""
    return {**clean_env(), **QUIET_PREFECT}


def fresh(base: Path, name: str) -> Path:
    root = base / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return root


def warm_up(base: Path, server: Server) -> None:
    """A few points at zero latency, so the measured run is not the server's first (it registers the flow)."""
    root = fresh(base, "warm-up")
    host = Host(cores=BENCH_HOST.cores, compile_slots=BENCH_HOST.compile_slots, time_scale=0.0)
    run_child(
        "flow", mlp_spec(4, root, host.compile_slots), root, {**user_env(), **host.env(root), **server.client_env()}
    )


# ---------------------------------------------------------------- tools
def section_tools(base: Path) -> None:
    print(f"\n== Simulated tool calls: CPU per call (children's CPU, one call at a time; {load()})")
    as_is = tool_costs()
    cached = _tool_costs_with_bytecode(base)
    flag = "set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "not set"
    print(f"PYTHONDONTWRITEBYTECODE is {flag} here; 'with bytecode' runs the same calls with a bytecode cache")
    print(f"{'call':<38} {'as is ms':>9} {'with bytecode ms':>17}")
    for cost, warm in zip(as_is, cached, strict=True):
        reference = "(reference)" in cost.name
        mark = "" if reference else f"  {verdict(cost.ms, TARGET_MS)}"
        print(f"{cost.name:<38} {cost.ms:>9.1f} {warm:>17.1f}{mark}")


def _tool_costs_with_bytecode(base: Path) -> list[float]:
    """The same measurement in a child that may write bytecode, into a cache folder of its own."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    here = Path(__file__).resolve().parent
    answer = subprocess.run(
        [sys.executable, str(here / "toolcost.py"), "--ms-only"], env=env, capture_output=True, text=True, check=True
    )
    return [float(x) for x in answer.stdout.split()]


# ---------------------------------------------------------------- cost
def measured_flow(server: Server, mode: str, root: Path, points: int, host: Host) -> tuple[dict, float]:
    """A child sweep against `server`; returns its figures and the server CPU it caused (the
    server's idle CPU over the same time taken off)."""
    idle = _idle_rate(server)
    env = {**user_env(), **host.env(root), **server.client_env()}
    before, started = server.cpu_seconds(), time.perf_counter()
    figures = run_child(mode, mlp_spec(points, root, host.compile_slots), root, env)
    settle(server.cpu_seconds)
    return figures, server.cpu_seconds() - before - idle * (time.perf_counter() - started)


def _idle_rate(server: Server, seconds: float = 6.0) -> float:
    settle(server.cpu_seconds)
    before = server.cpu_seconds()
    time.sleep(seconds)
    return (server.cpu_seconds() - before) / seconds


def correctness_arithmetic_ms(spec: SweepSpec) -> float:
    """CPU per point of building the inputs and the reference output (one BLAS thread, as the sweep
    runs them): work that scales with the kernel's shape and that a real host does too, so it is
    shown apart from the rest of our per-point code."""
    from threadpoolctl import threadpool_limits

    points = expand(spec)
    started = time.process_time()
    with threadpool_limits(limits=1, user_api="blas"):
        for point in points:
            definition = load_kernel(point.kernel_ref)
            definition.reference(definition.build_inputs(point.params, point.dtype, point.seed), point.params)
    return (time.process_time() - started) / len(points) * 1000


def section_cost(base: Path, points: int) -> None:
    host = Host(cores=BENCH_HOST.cores, compile_slots=BENCH_HOST.compile_slots, time_scale=0.0)
    print(f"\n== CPU per point at zero tool latency ({points} MLP points, {host.cores} cores, "
          f"{host.compile_slots} slots; {load()})")  # fmt: skip
    ours = run_child("stages", mlp_spec(points, base / "cost-ours", host.compile_slots), base / "cost-ours",
                     {**clean_env(), **host.env(base / "cost-ours")})  # fmt: skip
    arithmetic = correctness_arithmetic_ms(mlp_spec(points, base / "cost-ours", host.compile_slots))
    shipped = _cost_on(base / "shipped", points, host, settings={}, floor=True)
    prefect_defaults = _cost_on(base / "prefect-defaults", points, host, settings=PREFECT_DEFAULT_RECORDING)
    print(f"  {'ms / point':<44} {'kernelsweep':>12} {'Prefect':>9}")
    print(f"  {'(server recording settings)':<44} {'(batched)':>12} {'defaults':>9}")
    rows = {}
    for name, run in (("shipped", shipped), ("defaults", prefect_defaults)):
        rows[name] = {
            "tool processes (simulated tools)": run.flow["children_cpu"],
            "Prefect client": run.flow["self_cpu"] - ours["self_cpu"],
            "Prefect server (SQLite)": run.server_cpu,
            "our code": ours["self_cpu"],
        }
    for label in rows["shipped"]:
        a, b = (rows[name][label] / points * 1000 for name in ("shipped", "defaults"))
        print(f"  {label:<44} {a:12.0f} {b:9.0f}")
    print(
        f"  {'  of our code, the correctness arithmetic':<44} {arithmetic:12.0f} {arithmetic:9.0f}   "
        "(inputs + float64 reference; cached by content: paid once per shape, not per platform or re-run)"
    )
    for name in ("shipped", "defaults"):
        rows[name]["total"] = sum(v for k, v in rows[name].items() if k != "tool processes (simulated tools)")
    total = {name: rows[name]["total"] / points * 1000 for name in rows}
    print(f"  {'client + server + ours':<44} {total['shipped']:12.0f} {total['defaults']:9.0f}")
    orchestration = total["shipped"] - arithmetic
    print(f"  {'  without the correctness arithmetic':<44} {orchestration:12.0f} {total['defaults'] - arithmetic:9.0f}"
          f"   {verdict(orchestration, COST_TARGET_MS)}")  # fmt: skip
    assert shipped.floor is not None and shipped.floor_server is not None
    floor_client, floor_srv = shipped.floor["self_cpu"] / points * 1000, shipped.floor_server / points * 1000
    print(f"  Prefect alone, five no-op stage-like tasks per point in the flow run (batched server): client "
          f"{floor_client:.0f} + server {floor_srv:.0f} = {floor_client + floor_srv:.0f} ms / point")  # fmt: skip
    print(f"  database growth (SQLite pages in use): {shipped.db_bytes / points / 1024:.1f} KB / point batched, "
          f"{prefect_defaults.db_bytes / points / 1024:.1f} with Prefect's defaults")  # fmt: skip
    print(f"  first point of the zero-latency flow run after {shipped.flow['first_point']:.1f} s")
    with postgres() as pg, prefect_server(base / "pg-server", database=pg) as server:
        warm_up(base, server)
        db_before = server.database_bytes()
        _, pg_cpu = measured_flow(server, "flow", fresh(base, "pg-flow"), points, host)
        pg_bytes = server.database_bytes() - db_before
    print(f"  PostgreSQL (batched): Prefect server + PostgreSQL {pg_cpu / points * 1000:.0f} ms / point, "
          f"database growth {pg_bytes / points / 1024:.1f} KB / point (pg_database_size); {load()}")  # fmt: skip


@dataclass
class CostRun:
    flow: dict
    server_cpu: float
    db_bytes: int
    floor: dict | None = None
    floor_server: float | None = None


def _cost_on(home: Path, points: int, host: Host, settings: dict[str, str], floor: bool = False) -> CostRun:
    """The sweep (and, if asked, Prefect's floor) against a fresh SQLite server with `settings` on top
    of `kernelsweep server`'s."""
    with prefect_server(home / "server", settings=settings) as server:
        warm_up(home, server)
        db_before = server.database_bytes()
        flow, server_cpu = measured_flow(server, "flow", fresh(home, "flow"), points, host)
        run = CostRun(flow, server_cpu, server.database_bytes() - db_before)
        if floor:
            run.floor, run.floor_server = measured_flow(server, "floor", fresh(home, "floor"), points, host)
    return run


# ---------------------------------------------------------------- first point
SPEC = """
name = "first-point"
platforms = ["trn2"]
toolchain = "sim"
results = "{root}/results"
artifacts = "{root}/artifacts"
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = {{ n = [2048] }}
"""


def first_point(root: Path, env: dict[str, str]) -> float:
    """Seconds from starting `kernelsweep run` to its line for the first finished point."""
    spec = root / "spec.toml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(SPEC.format(root=root))
    cli = [sys.executable, "-m", "kernelsweep.flows.cli", "run", str(spec)]
    started = time.perf_counter()
    with subprocess.Popen(cli, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=root) as process:  # fmt: skip
        assert process.stderr is not None
        for line in process.stderr:
            if "points done" in line:
                seconds = time.perf_counter() - started
                break
        else:
            raise RuntimeError(f"kernelsweep run exited {process.wait()} before its first point")
        process.wait()
    return seconds


def section_first(base: Path) -> None:
    print(f"\n== Time to the first point of `kernelsweep run` (one simulated point, zero tool latency; {load()})")
    home = fresh(base, "first-home")
    host = Host(cores=BENCH_HOST.cores, compile_slots=BENCH_HOST.compile_slots, time_scale=0.0)
    env = {**clean_env(), **host.env(base / "first-host"), "PREFECT_HOME": str(home)}
    fresh_home = first_point(fresh(base, "first-1"), env)
    used_home = first_point(fresh(base, "first-2"), env)
    port = free_port()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kernelsweep.flows.cli", "server", "start", "--port", str(port)],
                   env=env, check=True, capture_output=True)  # fmt: skip
    server_start = time.perf_counter() - started
    try:
        server_env = {**env, "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}
        first_point(fresh(base, "first-3"), server_env)  # the server's first flow registers the flow
        reused = first_point(fresh(base, "first-4"), server_env)
    finally:
        subprocess.run([sys.executable, "-m", "kernelsweep.flows.cli", "server", "stop"], env=env, capture_output=True)
    print(f"  the run's own Prefect server, fresh Prefect home {fresh_home:6.1f} s")
    print(f"  the run's own Prefect server, used Prefect home  {used_home:6.1f} s")
    print(f"  running `kernelsweep server` (PREFECT_API_URL)   {reused:6.1f} s")
    print(f"  (`kernelsweep server start` itself took {server_start:.1f} s, once for every later run)")


# ---------------------------------------------------------------- throughput
def section_throughput(base: Path, sizes: list[int], baseline_points: int, scale: float) -> None:
    host = Host(cores=BENCH_HOST.cores, compile_slots=BENCH_HOST.compile_slots, time_scale=scale)
    print(f"\n== Throughput: {host.cores} simulated cores, {host.compile_slots} compile slots, time scale {scale}; "
          f"{load()}")  # fmt: skip
    with prefect_server(base / "throughput-server") as server:
        warm_up(base, server)
        for n in sizes:
            root = fresh(base, f"tp-{n}")
            spec = mlp_spec(n, root, host.compile_slots)
            figures = run_child("flow", spec, root, {**user_env(), **host.env(root), **server.client_env()})
            assert figures["failed"] == 0, f"{figures['failed']} of {n} points failed"
            b = bound(root / "sim", shards(spec), host)
            ratio = figures["wall"] / b.seconds
            print(f"  {n} points: wall {figures['wall']:.1f} s, bound {b.seconds:.1f} s, wall / bound {ratio:.2f} "
                  f"{verdict(ratio, RATIO_TARGET)}")  # fmt: skip
            print(f"    {len(shards(spec))} flow run(s) one after another; configured per point: {b.per_point}; "
                  f"first point after {figures['first_point']:.1f} s")  # fmt: skip
            if n == baseline_points:
                seq_root = fresh(base, f"seq-{n}")
                seq = run_child("sequential", mlp_spec(n, seq_root, host.compile_slots), seq_root,
                                {**clean_env(), **host.env(seq_root)})  # fmt: skip
                sleeps = sum(r.slept_seconds for r in read_latencies(seq_root / "sim"))
                speedup = seq["wall"] / figures["wall"]
                print(f"  {n} points, seed 000's sequential method (no Prefect): {seq['wall']:.1f} s, "
                      f"{sleeps:.1f} s of it configured sleep")  # fmt: skip
                print(f"  speedup over it {speedup:.2f}x {verdict(speedup, SPEEDUP_TARGET, below=False)}")


# ---------------------------------------------------------------- big host
def section_big(base: Path, points: int, scale: float, flow_runs: int) -> None:
    host = Host(cores=64, compile_slots=48, time_scale=scale)
    print(f"\n== A big host: {host.cores} logical NeuronCores, {host.compile_slots} compile slots, time scale {scale}, "
          f"{points} points in {flow_runs} flow run(s) at once")  # fmt: skip
    root = fresh(base, "big")
    spec = mlp_spec(points, root, max(1, host.compile_slots // flow_runs), per_flow_run=points)
    with prefect_server(base / "big-server") as server:
        warm_up(base, server)
        env = {**worker_env(), **host.env(root), **server.client_env()}
        size = -(-points // flow_runs)
        server_before = server.cpu_seconds()
        started = time.perf_counter()
        children = [
            start_child(
                "shard", spec, root, env, {"index": i, "count": flow_runs, "start": i * size, "stop": (i + 1) * size}
            )
            for i in range(flow_runs)
        ]
        results = [child.result() for child in children]
        wall = time.perf_counter() - started
        server_cpu = server.cpu_seconds() - server_before
    failed = sum(r["failed"] for r in results)
    assert failed == 0, f"{failed} of {points} points failed"
    b = bound(root / "sim", [expand(spec)], host)  # every point shares the host at once
    ratio = wall / b.seconds
    print(f"  wall {wall:.1f} s, bound {b.seconds:.1f} s, wall / bound {ratio:.2f} {verdict(ratio, BIG_RATIO_TARGET)}")
    used = server_cpu + sum(r["self_cpu"] + r["children_cpu"] for r in results)
    print(f"    configured per point: {b.per_point}; this machine's CPUs were {used / wall / os.cpu_count():.0%} busy "
          f"({used:.0f} CPU-seconds: flow runs, tools and the Prefect server)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--points", type=int, nargs="+", default=[64, 256], help="throughput sweep sizes")
    parser.add_argument("--time-scale", type=float, default=0.5, help="tool latency scale (1: compile ~4.3 s)")
    parser.add_argument("--baseline-points", type=int, default=64, help="where the sequential method runs too")
    parser.add_argument("--cost-points", type=int, default=64)
    parser.add_argument("--big-points", type=int, default=96)
    parser.add_argument("--big-scale", type=float, default=16.0, help="the big host's latency scale (to fit 2 CPUs)")
    parser.add_argument("--big-flow-runs", type=int, default=1)
    parser.add_argument("--fleet-hosts", type=int, nargs="+", default=[1, 2, 4, 8], help="simulated hosts at once")
    parser.add_argument("--fleet-points", type=int, default=32, help="zero-latency points per fleet host")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kernelsweep-bench-"))
    print(f"kernelsweep throughput benchmark; at the start: {load()}")
    try:
        if "tools" in args.only:
            section_tools(base)
        if "cost" in args.only:
            section_cost(base, args.cost_points)
        if "first" in args.only:
            section_first(base)
        if "throughput" in args.only:
            section_throughput(base, args.points, args.baseline_points, args.time_scale)
        if "big" in args.only:
            section_big(base, args.big_points, args.big_scale, args.big_flow_runs)
        if "fleet" in args.only:
            section_fleet(base, args.fleet_hosts, args.fleet_points)
    finally:
        print(f"\nat the end: {load()}")
        with contextlib.suppress(OSError):
            shutil.rmtree(base)


if __name__ == "__main__":
    main()
