"""The `sweep` flow: every point of a spec on this host, then one Parquet object per platform.

Points fan out as task chains on a bounded thread pool inside one flow run (a subflow per point
would cost ~1.1 s each; a chain of six tasks ~70 ms). Each thread runs in a copy of the flow's
context, so its task calls belong to this flow run. Points move through the stages independently:
later points compile (bounded by compile slots) while earlier ones capture (bounded by NeuronCore
leases). Sweeps larger than `execution.max_points_per_flow_run` run as several shard subflows, each
writing its own object, so a flow run's memory and its load on the Prefect server stay bounded.
"""

from __future__ import annotations

import contextvars
import math
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows.chain import run_point
from flows.lineage import point_artifact, results_asset_keys, summary_artifact, upstream_asset_keys
from flows.progress import publish
from flows.settings import locations_from_env
from kernelsweep.results.rows import build_row
from kernelsweep.runtime import prepare
from kernelsweep.spec import Point, SweepSpec, expand
from kernelsweep.stages import StageContext
from tasks import store_task

# What the CLI's summary and a flow's return value keep of each row: enough to report on,
# small enough that a sweep's memory stays flat in the number of points.
SUMMARY_KEYS = (
    "row_id",
    "kernel",
    "shape",
    "dtype",
    "platform",
    "status",
    "error_stage",
    "error_class",
    "error_message",
    "total_time_us",
    "achieved_tflops",
    "mfu_percent",
    "roofline_percent",
    "correct",
    "is_simulation",
)
POOL_SLACK = 2  # threads beyond compile slots + cores, so the next point is traced and ready


@flow(name="sweep", flow_run_name="sweep-{spec.name}")
def sweep(spec: SweepSpec) -> dict:
    """Run every point of a sweep spec on this host and write its results.

    Args:
        spec: The sweep: kernels, parameter grid, dtypes, platforms, capture settings, locations.
    """
    points = expand(spec)
    shards = math.ceil(len(points) / spec.execution.max_points_per_flow_run)
    if shards <= 1:
        return run_here(spec, points)
    reports = [sweep_shard(spec, shard, shards) for shard in range(shards)]
    return {
        "flow_run_id": str(flow_run.id),
        "paths": [p for r in reports for p in r["paths"]],
        "rows": [row for r in reports for row in r["rows"]],
    }


@flow(name="sweep-shard", flow_run_name="sweep-{spec.name}-shard-{shard}-of-{shards}")
def sweep_shard(spec: SweepSpec, shard: int, shards: int) -> dict:
    """Run one contiguous slice of a sweep's points (shard 0 .. shards-1).

    Args:
        spec: The whole sweep.
        shard: Which slice this run takes.
        shards: How many slices the sweep is cut into.
    """
    points = expand(spec)
    size = math.ceil(len(points) / shards)
    return run_here(spec, points[shard * size : (shard + 1) * size])


def run_here(spec: SweepSpec, points: list[Point]) -> dict:
    ctx, notice = prepare(spec, locations_from_env())
    if notice:
        get_run_logger().info(notice)
    return run_points(spec, ctx, points)


def run_points(spec: SweepSpec, ctx: StageContext, points: list[Point]) -> dict:
    """Run the chains, then store one object per platform for this flow run."""
    run_id = str(flow_run.id)
    rows = []
    workers = min(len(points), ctx.compile_slots + len(ctx.leaser.logical_cores) + POOL_SLACK)
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="point") as pool:
        futures = [pool.submit(contextvars.copy_context().run, run_point, ctx, p) for p in points]
        for future in as_completed(futures):
            row = build_row(
                future.result(),
                flow_run_id=run_id,
                toolchain=ctx.toolchain.kind,
                is_simulation=ctx.toolchain.is_simulation,
                versions=ctx.versions,
            )
            rows.append(row)
            point_artifact(row)
            publish(row)
    scheduled = flow_run.scheduled_start_time or datetime.now(UTC)
    lineage = {
        "sweep": spec.name,
        "flow_run_id": run_id,
        "toolchain": ctx.toolchain.kind,
        "is_simulation": ctx.toolchain.is_simulation,
        "versions": ctx.versions.as_dict(),
        "points": len(points),
        "failed": sum(r["status"] != "ok" for r in rows),
    }
    run_date = scheduled.astimezone(UTC).date()
    store = store_task.with_options(
        assets=results_asset_keys(spec.results, [r["platform"] for r in rows], run_date, run_id),
        asset_deps=upstream_asset_keys(rows),
    )
    paths = store(rows, spec.results, run_id, run_date, lineage)
    summary_artifact(spec.name, rows)
    return {"flow_run_id": run_id, "paths": paths, "rows": [{k: r.get(k) for k in SUMMARY_KEYS} for r in rows]}
