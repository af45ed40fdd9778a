"""The `sweep` flow: every point of a spec on this host, then one Parquet object per platform.

Points fan out as task chains on a bounded thread pool inside one flow run (a subflow per point
would cost ~1.1 s each; a chain of six tasks ~70 ms). Each thread runs in a copy of the flow's
context, so its task calls belong to this flow run. Points move through the stages independently:
later points compile (bounded by compile slots) while earlier ones capture (bounded by NeuronCore
leases). Sweeps larger than `execution.max_points_per_flow_run` run as several shard subflows, each
handed its own slice of the points and writing its own object, so a flow run's memory and its load
on the Prefect server stay bounded. flows/README.md says why there is no `.submit()` here.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from kernelsweep.context import StageContext, prepare
from kernelsweep.flows.chain import run_point
from kernelsweep.flows.progress import publish
from kernelsweep.flows.settings import locations_from_env
from kernelsweep.flows.ui import point_artifact, results_asset_keys, summary_artifact, upstream_asset_keys
from kernelsweep.probe import probe_location
from kernelsweep.results.rows import Row, build_row
from kernelsweep.results.summary import SweepReport
from kernelsweep.spec import Point, SweepSpec, expand
from kernelsweep.tasks import store_task

POOL_SLACK = 2  # threads beyond compile slots + cores, so the next point is traced and ready


@flow(name="sweep", flow_run_name="sweep-{spec.name}")
def sweep(spec: SweepSpec) -> SweepReport:
    """Run every point of a sweep spec on this host and write its results.

    Args:
        spec: The sweep: kernels, parameter grid, dtypes, platforms, capture settings, locations.
    """
    points = expand(spec)
    shards = math.ceil(len(points) / spec.execution.max_points_per_flow_run)
    if shards <= 1:
        return run_on_this_host(spec, points)
    size = math.ceil(len(points) / shards)  # even slices, each within the limit
    reports = [sweep_shard(spec, points[shard * size : (shard + 1) * size], shard, shards) for shard in range(shards)]
    return SweepReport.merge(str(flow_run.id), reports)


@flow(name="sweep-shard", flow_run_name="sweep-{spec.name}-shard-{shard}-of-{shards}")
def sweep_shard(spec: SweepSpec, points: list[Point], shard: int, shards: int) -> SweepReport:
    """Run one slice of a sweep's points (shard 0 .. shards-1).

    Args:
        spec: The whole sweep (capture settings, locations).
        points: This shard's points, as the parent expanded them.
        shard: Which slice this run takes.
        shards: How many slices the sweep is cut into.
    """
    return run_on_this_host(spec, points)


def run_on_this_host(spec: SweepSpec, points: list[Point]) -> SweepReport:
    """A run started from a deployment fails here, before any point, exactly as the CLI would."""
    probe_location(spec.results, "results", "the spec's `results`")
    probe_location(spec.artifacts, "artifact store", "the spec's `artifacts`")
    ctx, notice = prepare(spec, locations_from_env())
    mine, left = ctx.host.split(points)
    for line in (notice, ctx.host.notice(left, len(points))):
        if line:
            get_run_logger().info(line)
    report = run_points(spec, ctx, mine) if mine else SweepReport(flow_run_id=str(flow_run.id))
    return dataclasses.replace(report, left_for_other_hosts=dict(left))


def run_points(spec: SweepSpec, ctx: StageContext, points: list[Point]) -> SweepReport:
    """Run the chains, then store one object per platform for this flow run."""
    run_id = str(flow_run.id)
    rows: list[Row] = []
    workers = min(len(points), ctx.compile_slots + ctx.capture_slots + POOL_SLACK)
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
            publish(row.summary())
    scheduled = flow_run.scheduled_start_time or datetime.now(UTC)
    lineage = {
        "sweep": spec.name,
        "flow_run_id": run_id,
        "toolchain": ctx.toolchain.kind,
        "is_simulation": ctx.toolchain.is_simulation,
        "versions": ctx.versions.as_dict(),
        "points": len(points),
        "failed": sum(r.status != "ok" for r in rows),
    }
    run_date = scheduled.astimezone(UTC).date()
    store = store_task.with_options(
        assets=results_asset_keys(spec.results, [r.platform for r in rows], run_date, run_id),
        asset_deps=upstream_asset_keys(rows),
    )
    paths = store(rows, spec.results, run_id, run_date, lineage)
    summaries = [row.summary() for row in rows]
    summary_artifact(spec.name, summaries)
    return SweepReport(flow_run_id=run_id, paths=paths, rows=summaries)
