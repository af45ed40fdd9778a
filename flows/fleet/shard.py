"""One shard of a fleet run on the host that took it: the checks before any point, its journal, and
what it tells the fleet.

- **The host says what it is.** Its name (the worker's), family and SDK versions go on the shard's
  flow run as labels (kernelsweep.fleet.hosts.HostReport) and into its log, before anything else:
  the fleet's summary reads them to flag a family whose hosts run different SDKs.
- **A host that cannot run the shard refuses it** before measuring anything: a host of another
  family (a worker started in the wrong pool) would run none of the points, and a host whose
  versions miss the run's `require` pins would mix SDKs into the night. Either fails the shard with
  one line naming the host and its pool, and the shard is retried (kernelsweep.flows.fleet.automations) on
  whichever host of the family the pool hands it next.
- **Finished points are journaled** under a key of the fleet run and the shard
  (kernelsweep.fleet.plan.shard_journal_key), next to the results: a retried shard, on any host, reuses
  every point an earlier attempt finished and measures only the rest, under the first attempt's id
  (so its rows keep their ids). A point's capture is journaled as soon as its NTFFs are stored, so
  the retry extracts it instead of taking the device again; the earlier attempt's task runs, left
  Running when its host died, are marked Crashed first.
- **The last shard brings a failed fleet run back**: a shard completed by a retry after its fleet
  run gave up (a manual `prefect flow-run retry`) re-runs the fleet run once every shard has
  completed, so its summary is brought up to date and its completion triggers the report.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import NoReturn
from uuid import UUID

from prefect import get_client, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterParentFlowRunId,
    TaskRunFilter,
    TaskRunFilterState,
    TaskRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.events import emit_event
from prefect.runtime import flow_run
from prefect.states import Crashed, Scheduled

from kernelsweep.errors import UsageError
from kernelsweep.fleet import Shard
from kernelsweep.fleet.farm import SDK_NAMES
from kernelsweep.fleet.hosts import VERSION_NAMES, HostReport, attempt_label, unmet
from kernelsweep.fleet.plan import pool_name, shard_journal_key
from kernelsweep.flows.fleet.automations import REFUSED_EVENT, refusal_resource
from kernelsweep.flows.fleet.farm import farm_or_here
from kernelsweep.flows.host_run import probe_locations, run_points, scheduled_date
from kernelsweep.flows.progress import subscribe
from kernelsweep.flows.settings import host_name_from_env, locations_from_env
from kernelsweep.flows.stopping import stoppable
from kernelsweep.results import RowSummary, SweepOutcome, begin, plan_resume
from kernelsweep.sweepspec import Point, SweepSpec, expand_spec
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.this_host import StageContext, prepare_toolchains


def run_fleet_shard(
    spec: SweepSpec, points: list[Point], shard: int, fleet_run_id: str, search: bool = False
) -> SweepOutcome:
    """Shard `shard` of fleet run `fleet_run_id` on this host, resuming what earlier attempts finished.
    A search shard's `points` are its searched shapes: it runs their searches on the fleet run's shared
    studies (flows/search.py), its trials marked as this shard's and compiled on the farm while it is up."""
    _crash_earlier_attempts_tasks()
    probe_locations(spec)
    targets = searched(spec, points) if search else []
    grid = [] if search else points
    with stoppable() as stop:
        contexts, notice = prepare_toolchains(spec, points, locations_from_env(), stop)
        if notice:
            get_run_logger().info(notice)
        for ctx in contexts.values():
            check_host(spec, ctx, points, report_host(ctx))
        key = shard_journal_key(spec, fleet_run_id, shard)
        plan = plan_resume(spec.results_location, key, grid, find=True)
        started = datetime.now(UTC)
        journal = begin(spec.results_location, plan, str(flow_run.id), scheduled_date(), spec.name, started)
        total = sum(t.settings.budget for t in targets) or len(grid)
        try:
            with subscribe(Progress(total, len(plan.reused)).point_done):
                outcome = run_points(
                    spec,
                    contexts,
                    grid,
                    run_id=journal.run_id,
                    run_date=journal.run_date,
                    journal=journal,
                    reused=plan.reused,
                    targets=targets,
                    shared=(f"fleet-{fleet_run_id}", f"shard-{shard}") if search else None,
                    farm=farm_first(spec, shard, fleet_run_id, next(iter(contexts.values()))) if search else None,
                )
        finally:
            journal.release()  # the shard's lease, however it ends: the server's retry takes the journal over
    journal.close()
    rejoin_fleet(fleet_run_id)
    return outcome


def farm_first(spec: SweepSpec, shard: int, fleet_run_id: str, ctx: StageContext) -> Callable[[list[Point]], None]:
    """A search shard's batches, each compiled on the compile farm before this host captures it, while the
    farm is online (kernelsweep.flows.fleet.farm.compile_batch): held to this host's compiler and NKI, so its
    NEFFs are the ones this host looks up. A farm that is down, or whose compile run did not complete,
    leaves the batch to this host, which compiles what the store lacks (the rows' `neff_compile_host`)."""
    expect = {name: getattr(ctx.versions, name) for name in SDK_NAMES}

    def compile_first(batch: list[Point]) -> None:
        farm_or_here(spec, Shard(shard, batch[0].platform, batch), f"{len(batch)} trials", expect, fleet_run_id)

    return compile_first


def searched(spec: SweepSpec, shapes: list[Point]) -> list[SearchTarget]:
    """The spec's searches of these shapes (as the fleet run expanded them)."""
    wanted = {p.point_id for p in shapes}
    return [t for t in expand_spec(spec).targets if t.point.point_id in wanted]


def _crash_earlier_attempts_tasks() -> None:
    """A retried shard's earlier attempt died with its host, leaving its task runs Running (or Pending)
    for good in the UI; they are marked Crashed before this attempt starts any of its own."""
    if (flow_run.run_count or 1) <= 1:
        return
    with get_client(sync_client=True) as client:
        left = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(str(flow_run.id))])),
            task_run_filter=TaskRunFilter(
                state=TaskRunFilterState(type=TaskRunFilterStateType(any_=[StateType.RUNNING, StateType.PENDING]))
            ),
        )
        for task_run in left:
            client.set_task_run_state(task_run.id, Crashed(message="its shard's earlier attempt ended with it"),
                                      force=True)  # fmt: skip
    if left:
        get_run_logger().info("marked %d task runs of the earlier attempt Crashed", len(left))


class Progress:
    """The shard's progress artifact (points done of its points), which the UI and `kernelsweep fleet
    status` show: one update per finished point."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.done = total, done
        created = create_progress_artifact(self.percent(), description=self.describe())
        assert isinstance(created, UUID)  # called from a sync flow: Prefect runs it, not a coroutine
        self.id = created

    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    def describe(self) -> str:
        return f"{self.done} of {self.total} points"

    def point_done(self, _row: RowSummary) -> None:
        self.done += 1
        update_progress_artifact(self.id, self.percent(), description=self.describe())


def report_host(ctx: StageContext) -> HostReport:
    """This host's name, family and SDK versions: on the shard's flow run as labels, and in its log."""
    versions = {name: getattr(ctx.versions, name) for name in VERSION_NAMES}
    report = HostReport(host_name_from_env(), ctx.host.family, versions, ctx.toolchain.kind)
    with get_client(sync_client=True) as client:
        attempt = {attempt_label(flow_run.run_count or 1): report.host}  # the summary names every attempt's host
        client.update_flow_run_labels(UUID(str(flow_run.id)), {**report.labels(), **attempt})
    get_run_logger().info(report.line())
    return report


def check_host(spec: SweepSpec, ctx: StageContext, points: list[Point], host: HostReport) -> None:
    """Refuse a shard this host would run none of, or would run with versions the run does not allow."""
    family = points[0].platform if points else None
    where = _pool_of_this_run()
    if family is not None and not ctx.host.runs(family):
        refuse(
            host.host,
            "wrong-pool",
            f"host {host.host} is {ctx.host.family} ({ctx.host.source}) but sits in work pool {where}: it ran none "
            f"of this shard's {len(points)} {family} points; start its worker in {pool_name(str(ctx.host.family))}",
        )
    problems = unmet(spec.require, host.versions)
    if problems:
        refuse(
            host.host,
            "versions",
            f"host {host.host} in work pool {where} has {'; '.join(problems)}: it refuses this run's points; "
            "upgrade the host, or change `require` in the spec or the run form",
        )


def refuse(host: str, cause: str, message: str) -> NoReturn:
    """Refuse this shard in one line, first telling the operator: a retry on another host may complete
    the shard, and the night would look green while this host refuses every night (the refusal
    automation sends it once a night per host and cause: kernelsweep.flows.fleet.automations)."""
    emit_event(
        event=REFUSED_EVENT,
        resource=refusal_resource(host, cause),
        payload={
            "subject": f"kernelsweep host {host} refuses shards ({cause})",
            "body": f"{message} (flow run {flow_run.name}, {flow_run.id}, attempt {flow_run.run_count or 1})",
        },
    )
    raise UsageError(message)


def _pool_of_this_run() -> str:
    with get_client(sync_client=True) as client:
        return client.read_flow_run(UUID(str(flow_run.id))).work_pool_name or "(no work pool)"


def rejoin_fleet(fleet_run_id: str) -> None:
    """When this shard completes after its fleet run gave up and it is the last of its shards to, re-run
    the fleet run: it finds every shard done, publishes the summary and completes (which starts the report)."""
    with get_client(sync_client=True) as client:
        fleet = client.read_flow_run(UUID(fleet_run_id))
        if fleet.state is None or not fleet.state.is_final() or fleet.state.type == StateType.COMPLETED:
            return  # the fleet run is still waiting for its shards: it sees this one complete itself
        siblings = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[fleet.id]))
        )
        others = [run for run in siblings if str(run.id) != str(flow_run.id)]
        if all(run.state is not None and run.state.type == StateType.COMPLETED for run in others):
            message = "every shard completed after a retry: finishing the fleet run"
            client.set_flow_run_state(fleet.id, Scheduled(message=message), force=True)
            get_run_logger().info("%s %s", message, fleet_run_id)
