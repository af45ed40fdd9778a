"""Re-running an unchanged sweep: first run against an empty artifact store vs the same sweep again.

    python benchmarks/rerun.py                          # 16 MLP points, sim time scale 0.1
    python benchmarks/rerun.py --artifacts s3://bucket/prefix --results s3://bucket/prefix

The second run finds every IR and NEFF in the store's content-keyed caches, so it traces and
compiles nothing; it still generates inputs, captures and extracts every point (the measurement is
the point of a sweep). Prints both wall times, their ratio, and the re-run's cache hits per stage.
Tool latencies are emulated by the simulator (compile ~4-5 s, capture ~1.2 s at scale 1) and
scaled by --time-scale. Prefect's ephemeral server is started before anything is timed.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

QUIET = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "CRITICAL"}
for _k, _v in QUIET.items():
    os.environ.setdefault(_k, _v)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prefect import flow  # noqa: E402

from kernelsweep.results import reader  # noqa: E402
from kernelsweep.sim.config import sim_env  # noqa: E402
from kernelsweep.sweepspec.load import parse_spec  # noqa: E402
from kernelsweep.sweepspec.models import SweepSpec  # noqa: E402


def make_spec(points: int, results: str, artifacts: str, compile_slots: int) -> SweepSpec:
    """An MLP grid of exactly `points` points (a multiple of 4): 2 dtypes x 2 sequence lengths x h x i."""
    per_dtype_seq = max(points // 4, 1)
    h_count = 2 ** math.ceil(math.log2(per_dtype_seq) / 2)
    i_count = max(per_dtype_seq // h_count, 1)
    return parse_spec(
        {
            "name": f"rerun-{points}",
            "platforms": ["trn2"],
            "toolchain": "sim",
            "results": results,
            "artifacts": artifacts,
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


@flow(name="bench-warm-up")
def warm_up() -> None:
    """Starts Prefect's ephemeral server, so neither timed run pays for it."""


def timed_sweep(spec: SweepSpec) -> tuple[float, list[dict]]:
    from kernelsweep.flows.sweep import sweep

    started = time.perf_counter()
    report = sweep(spec)
    wall = time.perf_counter() - started
    rows = [r for r in reader.read(spec.results).to_pylist() if r["flow_run_id"] in _run_ids(report)]
    return wall, rows


def _run_ids(report: dict) -> set[str]:
    return {p.rsplit("/", 1)[1].split(".")[0] for p in report.paths}


def _hits(rows: list[dict], column: str) -> str:
    return f"{sum(bool(r[column]) for r in rows)}/{len(rows)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=16)
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--cores", type=int, default=2, help="simulated NeuronCores")
    parser.add_argument("--compile-slots", type=int, default=2)
    parser.add_argument("--results", help="folder or s3:// URI (default: a temporary folder)")
    parser.add_argument("--artifacts", help="folder or s3:// URI, empty at the start (default: a temporary folder)")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="kernelsweep-rerun-"))
    os.environ |= sim_env(time_scale=float(args.time_scale), cores=args.cores, state_dir=base / "sim")
    os.environ["KERNELSWEEP_LOCK_DIR"] = str(base / "leases")
    results = args.results or str(base / "results")
    artifacts = args.artifacts or str(base / "artifacts")
    spec = make_spec(args.points, results, artifacts, args.compile_slots)
    warm_up()

    first_wall, first = timed_sweep(spec)
    again_wall, again = timed_sweep(spec)
    for rows in (first, again):
        assert len(rows) == args.points and all(r["status"] == "ok" for r in rows), "benchmark sweep had failures"
    assert not any(r["compile_cache_hit"] for r in first), "the artifact store was not empty at the start"

    print(
        f"{args.points} MLP points on trn2 (simulated), time scale {args.time_scale}, "
        f"{args.cores} cores, {args.compile_slots} compile slots; artifacts {artifacts}"
    )
    for label, wall, rows in (("first run", first_wall, first), ("re-run", again_wall, again)):
        compile_bound = sum(r["compile_seconds"] or 0 for r in rows) / args.compile_slots
        capture_bound = sum(r["capture_seconds"] or 0 for r in rows) / args.cores
        print(
            f"{label:<9} {wall:7.2f} s   cache hits: trace {_hits(rows, 'trace_cache_hit'):>5}, "
            f"compile {_hits(rows, 'compile_cache_hit'):>5}   "
            f"bounds: compile {compile_bound:5.2f} s/slot, capture {capture_bound:5.2f} s/core"
        )
    print(
        f"re-run / first run = {again_wall / first_wall:.2f} ({first_wall / again_wall:.2f}x); the re-run's floor "
        "is its capture bound: captures are re-measured, only tracing and compiling are skipped"
    )
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
