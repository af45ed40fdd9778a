"""The `sweep` flow: every point of a spec on this host, then one Parquet object per platform.

Points fan out as task chains on a bounded thread pool inside one flow run (a subflow per point
would cost ~1.1 s each; a chain of five task calls ~70 ms). Each thread runs in a copy of the flow's
context, so its task calls belong to this flow run. Points move through the stages independently:
later points compile (bounded by compile slots) while earlier ones capture (bounded by NeuronCore
leases). Sweeps larger than `execution.max_points_per_flow_run` run as several shard subflows, each
handed its own slice of the points and writing its own object, so a flow run's memory and its load
on the Prefect server stay bounded. flows/README.md says why there is no `.submit()` here.

Nothing measured is lost: each finished point's row goes to the run's journal (next to the
results, kernelsweep.results.journal) before anything else happens to it, and the objects are
written from those rows once every point is done. A run stopped before that (`stopping.request_stop`,
a journal that cannot be written) raises and leaves the journal; `sweep(..., resume_run_id=...)`
then finishes that run under its own id and date, reusing every point it finished ok.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from kernelsweep.errors import UsageError
from kernelsweep.flows.host_run import SweepInterrupted, probe_locations, run_on_this_host, scheduled_date
from kernelsweep.results import SweepOutcome
from kernelsweep.results.journal import Journal, ResumePlan, begin, plan_resume, run_key
from kernelsweep.sweepspec import DEFAULT_MAX_POINTS, Expansion, Point, SweepSpec, expand_spec
from kernelsweep.this_host.context import host_memory_bytes


@flow(name="sweep", flow_run_name="sweep-{spec.name}")
def sweep(
    spec: SweepSpec, resume_run_id: str | None = None, remeasure: bool = False, max_points: int = DEFAULT_MAX_POINTS
) -> SweepOutcome:
    """Run every point of a sweep spec on this host and write its results.

    Args:
        spec: The sweep: kernels, parameter grid, dtypes, platforms, capture settings, locations.
        resume_run_id: Finish this interrupted run of the same spec (its journal is next to the
            results) under its own id: points it finished ok are reused, the rest are measured.
        remeasure: With resume_run_id, measure again the points the interrupted run finished.
        max_points: Refuse a spec that expands to more points than this.
    """
    expansion = expand_spec(spec, max_points=max_points, host_memory_bytes=host_memory_bytes())
    for notice in expansion.notices:
        get_run_logger().warning(notice)
    points = expansion.points
    if expansion.targets and len(points) > spec.execution.max_points_per_flow_run:
        raise UsageError(
            f"{spec.name}: a sweep with a search runs in one flow run, but its {len(points)} grid points are over "
            f"execution.max_points_per_flow_run={spec.execution.max_points_per_flow_run}; raise it or split the spec"
        )
    probe_locations(spec)  # before the journal: an unwritable location is a usage error, found in a second
    plan = plan_resume(spec.results_location, run_key(spec), points, run_id=resume_run_id, remeasure=remeasure)
    journal = begin(spec.results_location, plan, str(flow_run.id), scheduled_date(), spec.name, datetime.now(UTC))
    try:
        report = _sweep_points(spec, expansion, journal, plan, remeasure)
        journal.close()
    finally:
        journal.release()  # the run's lease, however it ends (a resume may take the journal over)
    if expansion.targets:  # the searches' winners, confirmed, into the tuned store (docs/tuning.md)
        from kernelsweep.flows.contest import confirm_searches  # the report's modules: a search's run only

        confirm_searches(spec, expansion.targets, {report.flow_run_id}, run=sweep)
    return report


def _sweep_points(
    spec: SweepSpec, expansion: Expansion, journal: Journal, plan: ResumePlan, remeasure: bool
) -> SweepOutcome:
    """On this host, or in shard subflows of at most `max_points_per_flow_run` points each."""
    points = expansion.points
    shards = math.ceil(len(points) / spec.execution.max_points_per_flow_run)
    if shards <= 1:
        return run_on_this_host(
            spec, points, journal=journal, run_id=journal.run_id, reused=plan.reused, targets=expansion.targets
        )
    size = math.ceil(len(points) / shards)  # even slices, each within the limit
    slices = [points[shard * size : (shard + 1) * size] for shard in range(shards)]
    reports: list[SweepOutcome] = []
    for shard, part in enumerate(slices):
        try:
            reports.append(sweep_shard(spec, part, shard, shards, journal.run_id, remeasure))
        except SweepInterrupted as exc:
            done = sum(len(r.rows) for r in reports) + exc.done
            raise SweepInterrupted(done, len(points), journal.uri) from None
    return SweepOutcome.merge(journal.run_id, reports)


@flow(name="sweep-shard", flow_run_name="sweep-{spec.name}-shard-{shard}-of-{shards}")
def sweep_shard(
    spec: SweepSpec,
    points: list[Point],
    shard: int,
    shards: int,
    journal_run_id: str | None = None,
    remeasure: bool = False,
    fleet_run_id: str | None = None,
    search: bool = False,
) -> SweepOutcome:
    """Run one slice of a sweep's points (shard 0 .. shards-1).

    Args:
        spec: The whole sweep (capture settings, locations).
        points: This shard's points, as the parent expanded them.
        shard: Which slice this run takes.
        shards: How many slices the sweep is cut into.
        journal_run_id: The parent run whose journal holds this shard's rows (and, when the parent
            is resumed, the id this shard first ran under).
        remeasure: Measure again the points a previous attempt of this shard finished.
        fleet_run_id: The fleet run this shard belongs to (set by the fleet flow): its points are of one
            family, journaled per fleet run and shard, and a host that cannot run them refuses them.
        search: With fleet_run_id, `points` are searched shapes: this shard measures their trials, as its
            fleet run's shared studies propose them, until the budgets are used.
    """
    if fleet_run_id is not None:
        # the fleet's modules (pandas, pyarrow's datasets): imported by its shards only
        from kernelsweep.flows.fleet.shard import run_fleet_shard

        return run_fleet_shard(spec, points, shard, fleet_run_id, search)
    if journal_run_id is None:
        return run_on_this_host(spec, points)
    plan = plan_resume(spec.results_location, run_key(spec), points, run_id=journal_run_id, remeasure=remeasure)
    journal = begin(spec.results_location, plan, journal_run_id, scheduled_date(), spec.name, datetime.now(UTC))
    try:
        run_id = journal.shard_run_id(shard, str(flow_run.id))
        return run_on_this_host(spec, points, journal=journal, run_id=run_id, reused=plan.reused)
    finally:
        journal.release()
