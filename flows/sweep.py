"""The `sweep` flow: every point of a spec on this host, then one Parquet object per platform.

Points fan out as task chains on a bounded thread pool inside one flow run (a subflow per point
would cost ~1.1 s each; a chain of six tasks ~70 ms). Each thread runs in a copy of the flow's
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

import dataclasses
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from kernelsweep.blocks import SearchTarget
from kernelsweep.context import StageContext, host_memory_bytes
from kernelsweep.errors import KernelsweepError, StoreError, UsageError
from kernelsweep.expansion import DEFAULT_MAX_POINTS, Expansion, expand_spec
from kernelsweep.fleet_hosts import VERSION_NAMES, unmet
from kernelsweep.flows.pool import measure
from kernelsweep.flows.search import run_searches
from kernelsweep.flows.settings import locations_from_env
from kernelsweep.flows.shard import run_fleet_shard
from kernelsweep.flows.stopping import stoppable
from kernelsweep.flows.ui import lineage_artifact, results_asset_keys, summary_artifact, upstream_asset_keys
from kernelsweep.probe import probe_location
from kernelsweep.results.journal import Journal, ResumePlan, begin, plan_resume, run_key
from kernelsweep.results.outcome import SweepOutcome
from kernelsweep.results.pairing import pair
from kernelsweep.results.rows import Row
from kernelsweep.spec import Point, SweepSpec
from kernelsweep.tasks import store_task
from kernelsweep.toolchains import prepare_toolchains


class SweepInterrupted(KernelsweepError):
    """Stopped before every point ran; the finished ones are in the journal, and `done` says how many."""

    def __init__(self, done: int, total: int, journal_uri: str | None) -> None:
        saved = f"saved in {journal_uri}" if journal_uri else "not saved (this run keeps no journal)"
        super().__init__(
            f"stopped with {done} of {total} points done, {saved}; the same `kernelsweep run` "
            f"reuses them and runs the other {total - done}"
        )
        self.done, self.total = done, total


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
    _probe_locations(spec)  # before the journal: an unwritable location is a usage error, found in a second
    plan = plan_resume(spec.results_location, run_key(spec), points, run_id=resume_run_id, remeasure=remeasure)
    journal = begin(spec.results_location, plan, str(flow_run.id), scheduled_date(), spec.name, datetime.now(UTC))
    try:
        report = _sweep_points(spec, expansion, journal, plan, remeasure)
        journal.close()
    finally:
        journal.release()  # the run's lease, however it ends (a resume may take the journal over)
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
    """
    if fleet_run_id is not None:
        return run_fleet_shard(spec, points, shard, fleet_run_id)
    if journal_run_id is None:
        return run_on_this_host(spec, points)
    plan = plan_resume(spec.results_location, run_key(spec), points, run_id=journal_run_id, remeasure=remeasure)
    journal = begin(spec.results_location, plan, journal_run_id, scheduled_date(), spec.name, datetime.now(UTC))
    try:
        run_id = journal.shard_run_id(shard, str(flow_run.id))
        return run_on_this_host(spec, points, journal=journal, run_id=run_id, reused=plan.reused)
    finally:
        journal.release()


def run_on_this_host(
    spec: SweepSpec,
    points: list[Point],
    *,
    journal: Journal | None = None,
    run_id: str | None = None,
    reused: Mapping[str, Row] | None = None,
    targets: list[SearchTarget] | None = None,
) -> SweepOutcome:
    """`targets` are the shapes whose tunables a search chooses (kernelsweep.blocks).
    `run_id` is the id the rows and objects carry (default: this flow run's); `journal` None keeps
    no journal (a one-point run), and its locations are probed here (a journal's were, by its sweep).
    `reused` holds the rows of points an interrupted run finished (kernelsweep.results.journal.plan_resume).
    """
    if journal is None:
        _probe_locations(spec)
    with stoppable() as stop:
        targets = targets or []
        contexts, notice = prepare_toolchains(spec, [*points, *(t.point for t in targets)], locations_from_env(), stop)
        ctx = next(iter(contexts.values()))
        for each in contexts.values():
            refuse_unpinned(spec, each)
        mine, left = ctx.host.split(points)
        for line in (notice, ctx.host.notice(left, len(points))):
            if line:
                get_run_logger().info(line)
        run_id = run_id or str(flow_run.id)
        run_date = journal.run_date if journal else scheduled_date()
        if mine or targets:
            ids = {p.point_id for p in mine}
            kept = {point_id: row for point_id, row in (reused or {}).items() if point_id in ids}
            report = run_points(
                spec, contexts, mine, run_id=run_id, run_date=run_date, journal=journal, reused=kept, targets=targets
            )
        else:
            report = SweepOutcome(flow_run_id=run_id)
    return dataclasses.replace(report, left_for_other_hosts=dict(left))


def run_points(
    spec: SweepSpec,
    contexts: Mapping[str, StageContext],
    points: list[Point],
    *,
    run_id: str,
    run_date: date,
    journal: Journal | None = None,
    reused: Mapping[str, Row] | None = None,
    targets: Sequence[SearchTarget] = (),
) -> SweepOutcome:
    """Measure the points not in `reused` (journaling each row first), each under its toolchain's context,
    then store one object per platform."""
    reused = reused or {}
    if reused:
        get_run_logger().info(f"reusing {len(reused)} of {len(points)} points finished before by run {run_id}")
    measured, unsaved = measure(contexts, [p for p in points if p.point_id not in reused], run_id, journal)
    stopped = len(measured) + len(reused) < len(points)
    if targets and unsaved is None and not stopped:
        searched, unsaved, stopped = run_searches(spec, contexts, targets, run_id, journal)
        measured += searched
    rows = pair([*reused.values(), *measured])  # each kernel row's speedup over its baseline's row
    if rows:  # in the UI even when the run goes no further: the points it finished, and their artifacts
        lineage_artifact(spec.name, rows)
    where = journal.uri if journal is not None else None
    if unsaved is not None:
        raise StoreError(
            f"{unsaved.message}; {len(rows)} finished points are saved in {where}: once the location works "
            "again, the same `kernelsweep run` reuses them and finishes the rest",
            error_class=unsaved.error_class,
        )
    if stopped:
        raise SweepInterrupted(len(rows), len(points) + sum(t.settings.budget for t in targets), where)
    paths = _store(spec, next(iter(contexts.values())), rows, run_id, run_date, where)
    summaries = [row.summary() for row in rows]
    summary_artifact(spec.name, summaries)
    return SweepOutcome(flow_run_id=run_id, paths=paths, rows=summaries)


def _store(
    spec: SweepSpec, ctx: StageContext, rows: list[Row], run_id: str, run_date: date, journal_uri: str | None
) -> list[str]:
    """One object per platform through the store task (an asset materialization each); a failure says
    where the rows are kept."""
    lineage = {
        "sweep": spec.name,
        "flow_run_id": run_id,
        "toolchain": ctx.toolchain.kind,
        "is_simulation": ctx.toolchain.is_simulation,
        "versions": ctx.versions.as_dict(),
        "points": len(rows),
        "failed": sum(r.status != "ok" for r in rows),
    }
    store = store_task.with_options(
        assets=results_asset_keys(spec.results_location, [r.platform for r in rows], run_date, run_id),
        asset_deps=upstream_asset_keys(spec.artifacts_location),
    )
    try:
        return store(rows, spec.results_location, run_id, run_date, lineage)
    except StoreError as exc:
        kept = f"its {len(rows)} rows are saved in {journal_uri}" if journal_uri else "its rows are lost (no journal)"
        raise StoreError(
            f"{exc.message}; {kept}: the same `kernelsweep run` writes them once the location works",
            error_class=exc.error_class,
        ) from exc


def refuse_unpinned(spec: SweepSpec, ctx: StageContext) -> None:
    """A run that pins SDK versions (`require`) measures nothing on a host without them."""
    problems = unmet(spec.require, {name: getattr(ctx.versions, name) for name in VERSION_NAMES})
    if problems:
        raise UsageError(f"this host has {'; '.join(problems)}: run on a host with those versions or change `require`")


def _probe_locations(spec: SweepSpec) -> None:
    """A run started from a deployment fails before any point, exactly as the CLI would."""
    probe_location(spec.results_location, "results", "the spec's `results`")
    probe_location(spec.artifacts_location, "artifact store", "the spec's `artifacts`")


def scheduled_date() -> date:
    """The run's scheduled date (UTC): a retry after midnight keeps its objects' keys."""
    scheduled = flow_run.scheduled_start_time or datetime.now(UTC)
    return scheduled.astimezone(UTC).date()
