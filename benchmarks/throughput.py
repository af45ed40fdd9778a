"""Sweep throughput on the simulated toolchain: wall time against the ideal schedule.

    python benchmarks/throughput.py            # 16, 64 and 256 points; ~12 minutes on 2 cores

Tool latencies are emulated by the simulator from its model (compile ~4-5 s, capture ~1.2 s at
scale 1) and scaled down by --time-scale. Prints, per sweep size:
  - wall / ideal, ideal = max(sum compile / compile slots, sum capture / cores) + pipeline fill,
    from the compile and capture times the run itself measured (waits for slots and leases excluded);
  - speedup over the seed 000 way (compile every point, then capture them one by one; same
    adapters and simulator, no Prefect);
  - an unchanged re-run against the same artifact store (every trace and compile a cache hit) / first run;
and once: orchestration overhead per point at zero tool latency against a bare chain of six no-op
Prefect tasks per point (same pool size, same run), and resident-memory growth per 100 points.
"""

from __future__ import annotations

import argparse
import contextvars
import gc
import math
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

QUIET = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "CRITICAL"}
for _k, _v in QUIET.items():
    os.environ.setdefault(_k, _v)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prefect import flow, task  # noqa: E402

from kernelsweep import stages  # noqa: E402
from kernelsweep.context import Locations, prepare  # noqa: E402
from kernelsweep.expansion import expand  # noqa: E402
from kernelsweep.flows.sweep import run_points, sweep  # noqa: E402
from kernelsweep.spec import Point, SweepSpec, parse_spec  # noqa: E402


def make_spec(points: int, root: Path, compile_slots: int) -> SweepSpec:
    """An MLP grid of exactly `points` points: 2 dtypes x 2 sequence lengths x h x i."""
    per_dtype_seq = points // 4
    h_count = 2 ** math.ceil(math.log2(per_dtype_seq) / 2)
    i_count = per_dtype_seq // h_count
    return parse_spec(
        {
            "name": f"bench-{points}",
            "platforms": ["trn2"],
            "toolchain": "sim",
            "results": str(root / "results"),
            "artifacts": str(root / "artifacts"),
            "execution": {"compile_slots": compile_slots, "max_points_per_flow_run": max(points, 1)},
            "kernels": [
                {
                    "kernel": "kernelsweep.kernels.mlp:mlp",
                    "dtypes": ["bfloat16", "float16"],
                    "grid": {
                        "s": [128, 256],
                        "h": [128 * (k + 1) for k in range(h_count)],
                        "i": [128 * (k + 1) for k in range(i_count)],
                    },
                }
            ],
        }
    )


def configure(root: Path, scale: float, cores: int) -> Locations:
    locations = Locations(sim_state_dir=root / "sim", lock_dir=root / "leases")
    os.environ["KERNELSWEEP_SIM_TIME_SCALE"] = str(scale)
    os.environ["KERNELSWEEP_SIM_CORES"] = str(cores)
    os.environ["KERNELSWEEP_SIM_STATE"] = str(locations.sim_state_dir)  # for the real `sweep` flow
    os.environ["KERNELSWEEP_LOCK_DIR"] = str(locations.lock_dir)
    return locations


@flow(name="bench-sweep")
def pipelined(spec: SweepSpec, root: str) -> dict:
    ctx, _ = prepare(spec, Locations(sim_state_dir=Path(root) / "sim", lock_dir=Path(root) / "leases"))
    return run_points(spec, ctx, expand(spec))


def sequential_baseline(spec: SweepSpec, locations: Locations) -> float:
    """Seed 000's scripts: compile every point first, then capture + view them one by one."""
    ctx, _ = prepare(spec, locations)
    started = time.perf_counter()
    compiled = [(p, stages.compile_stage(ctx, p, stages.trace_stage(ctx, p))) for p in expand(spec)]
    for point, neff in compiled:
        captured = stages.capture_stage(ctx, point, neff, stages.inputs_stage(ctx, point))
        stages.extract_stage(ctx, point, neff, stages.inputs_stage(ctx, point), captured)
    return time.perf_counter() - started


def ideal_seconds(rows: list[dict], compile_slots: int, cores: int) -> float:
    compiles = [r["compile_seconds"] for r in rows]
    captures = [r["capture_seconds"] for r in rows]
    fill = min(compiles) + min(captures)
    return max(sum(compiles) / compile_slots, sum(captures) / cores) + fill


@task
def noop(x: int) -> int:
    return x


@flow(name="bench-bare-chain")
def bare_chain(points: int, workers: int) -> None:
    """Six no-op tasks per point on the same kind of pool: Prefect's own floor."""

    def chain(i: int) -> None:
        value = i
        for _ in range(6):
            value = noop(value)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda i: contextvars.copy_context().run(chain, i), range(points)))


def plain_threads(spec: SweepSpec, locations: Locations, workers: int) -> float:
    """The same six stages per point on the same pool, called directly: the work without Prefect."""
    ctx, _ = prepare(spec, locations)

    def chain(point: Point) -> None:
        traced = stages.trace_stage(ctx, point)
        neff = stages.compile_stage(ctx, point, traced)
        inputs = stages.inputs_stage(ctx, point)
        captured = stages.capture_stage(ctx, point, neff, inputs)
        stages.extract_stage(ctx, point, neff, inputs, captured)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(chain, expand(spec)))
    return time.perf_counter() - started


def fresh(base: Path, name: str) -> Path:
    root = base / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return root


def resident_mb() -> float:
    """Current (not peak) resident memory after a collection: what stays behind after a sweep."""
    gc.collect()
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def small_spec(points: int, root: Path, compile_slots: int) -> SweepSpec:
    """Matmuls of one small size class (M, K <= 128, N <= 512), so memory per point stays the same.

    Sharded as a user's sweep is: what a flow run holds in memory is bounded by its shard, not the sweep.

    Exactly `points` points when it is a multiple of 16 up to 256, or of 256 up to 2048.
    """
    m_count = min(16, points)
    n_count = min(16, math.ceil(points / m_count))
    k_count = math.ceil(points / (m_count * n_count))
    m_values = [8 * (k + 1) for k in range(m_count)]
    n_values = [32 * (k + 1) for k in range(n_count)]
    k_values = [16 * (k + 1) for k in range(k_count)]
    return parse_spec(
        {
            "name": f"rss-{points}",
            "platforms": ["trn2"],
            "toolchain": "sim",
            "results": str(root / "results"),
            "artifacts": str(root / "artifacts"),
            "execution": {"compile_slots": compile_slots},  # default shard size: a flow run holds <= 200 points
            "kernels": [
                {
                    "kernel": "kernelsweep.kernels.matmul:matmul",
                    "dtypes": ["float32"],
                    "grid": {"M": m_values, "K": k_values, "N": n_values},
                }
            ],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--time-scale", type=float, default=0.5, help="tool latency scale (1 = compile ~4 s)")
    parser.add_argument("--cores", type=int, default=4)
    parser.add_argument("--compile-slots", type=int, default=2)
    parser.add_argument("--baseline-max-points", type=int, default=64, help="skip the slow baseline above this")
    parser.add_argument("--overhead-points", type=int, default=64)
    parser.add_argument("--rss-points", type=int, default=128, help="16..256 (or a multiple of 256)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kernelsweep-bench-"))
    bare_chain(1, 1)  # start Prefect's ephemeral server before anything is timed
    print(f"sim cores {args.cores}, compile slots {args.compile_slots}, time scale {args.time_scale}")
    print(
        f"{'points':>6} {'wall s':>8} {'ideal s':>8} {'wall/ideal':>10} {'baseline s':>10} {'speedup':>8} "
        f"{'rerun s':>8} {'rerun/1st':>8}"
    )
    for n in args.points:
        root = fresh(base, f"run-{n}")
        locations = configure(root, args.time_scale, args.cores)
        spec = make_spec(n, root, args.compile_slots)
        started = time.perf_counter()
        report = pipelined(spec, str(root))
        wall = time.perf_counter() - started
        import pyarrow.parquet as pq

        rows = [r for p in report.paths for r in pq.read_table(p).to_pylist()]
        assert len(rows) == n and all(r["status"] == "ok" for r in rows), "benchmark sweep had failures"
        ideal = ideal_seconds(rows, args.compile_slots, args.cores)
        baseline = speedup = float("nan")
        if n <= args.baseline_max_points:
            base_root = fresh(base, f"base-{n}")  # its own artifact store: no cache hits from the run above
            baseline_spec = make_spec(n, base_root, args.compile_slots)
            baseline = sequential_baseline(baseline_spec, configure(base_root, args.time_scale, args.cores))
            speedup = baseline / wall
        started = time.perf_counter()
        pipelined(spec, str(root))  # unchanged sweep, same artifact store: traces and compiles are cache hits
        rerun = time.perf_counter() - started
        print(
            f"{n:>6} {wall:>8.1f} {ideal:>8.1f} {wall / ideal:>10.2f} {baseline:>10.1f} {speedup:>8.2f}x "
            f"{rerun:>8.1f} {rerun / wall:>8.2f}"
        )
        del locations

    n = args.overhead_points
    workers = args.compile_slots + args.cores + 2
    root = fresh(base, "zero")
    configure(root, 0.0, args.cores)
    spec = make_spec(n, root, args.compile_slots)
    started = time.perf_counter()
    pipelined(spec, str(root))
    with_prefect = time.perf_counter() - started
    plain_root = fresh(base, "zero-plain")  # its own artifact store, so it compiles as much as the run above
    without_prefect = plain_threads(
        make_spec(n, plain_root, args.compile_slots), configure(plain_root, 0.0, args.cores), workers
    )
    started = time.perf_counter()
    bare_chain(n, workers)
    floor = time.perf_counter() - started
    overhead_ms = (with_prefect - without_prefect) / n * 1000
    floor_ms = floor / n * 1000
    print(
        f"zero latency, {n} points: pipeline {with_prefect / n * 1000:.0f} ms/point, same work without Prefect "
        f"{without_prefect / n * 1000:.0f} ms/point -> orchestration overhead {overhead_ms:.0f} ms/point; "
        f"bare chain of six no-op tasks {floor_ms:.0f} ms/point; ratio {overhead_ms / floor_ms:.2f}"
    )
    rss = []
    for size in (args.rss_points, 4 * args.rss_points):  # the first run also warms the allocator up
        root = fresh(base, f"rss-{size}")
        configure(root, 0.0, args.cores)
        sweep(small_spec(size, root, args.compile_slots))  # the real flow, sharded as users' sweeps are
        rss.append(resident_mb())
    growth = (rss[1] - rss[0]) / (4 * args.rss_points / 100)
    print(
        f"resident memory {rss[0]:.0f} MB after {args.rss_points} points, {rss[1]:.0f} MB after "
        f"{4 * args.rss_points} more: {growth:+.2f} MB per 100 points"
    )
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
