"""The `fleet` flow: one sweep shared by every host of every family.

It runs on the small control pool. The spec is expanded once here; each family's points are cut into
shards (`kernelsweep.fleet.plan_shards`) and every shard becomes a flow run of that family's
`sweep-shard/<family>` deployment, so the family's work pool hands shards to whichever of its hosts
is free. The fleet run then only waits and finally publishes one summary, read from the dataset.

- Shards are submitted with an idempotency key derived from this flow run, so a retried fleet run
  finds its shards again instead of starting a second set.
- A shard that failed or crashed is re-run alone, as the same flow run (`prefect flow-run retry
  ID`, or Retry in the UI): the same flow run id gives the same row ids and result object, and the
  content-addressed trace/compile caches make the re-run skip finished work.
- A family whose pool has had no worker online for `execution.worker_wait_seconds` gets its
  unstarted shards cancelled with a message saying so, rather than a fleet run that never ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from prefect import flow, get_client, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, WorkerFilter, WorkerFilterStatus
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run
from prefect.settings import PREFECT_UI_URL
from prefect.states import Cancelled, Completed, Failed, State

from kernelsweep.errors import StoreError, UsageError
from kernelsweep.expansion import expand
from kernelsweep.fleet import Shard, ShardData, plan_shards, refuse_searches, shard_data, shard_deployment
from kernelsweep.flows.ui import artifact_key
from kernelsweep.s3 import S3Location
from kernelsweep.spec import SweepSpec

POLL_SECONDS = 2.0
_UNSTARTED = {StateType.SCHEDULED, StateType.PENDING}


@dataclass(frozen=True)
class ShardOutcome:
    shard: Shard
    flow_run_id: str
    state: str  # COMPLETED, FAILED, CRASHED, CANCELLED
    message: str
    data: ShardData

    @property
    def completed(self) -> bool:
        return self.state == StateType.COMPLETED.value


@flow(name="fleet", flow_run_name="fleet-{spec.name}")
def fleet(spec: SweepSpec) -> State:
    """Run a sweep across the fleet: each platform's points in shards on that platform's work pool.

    Args:
        spec: The sweep: kernels, parameter grid, dtypes, platforms, capture settings, locations.
    """
    log = get_run_logger()
    refuse_searches(spec, f"fleet {spec.name}")
    shards = plan_shards(expand(spec), spec.execution.max_points_per_flow_run)
    started = datetime.now(UTC)
    with get_client(sync_client=True) as client:
        pools = {family: _pool_of(client, family) for family in {s.family for s in shards}}
        runs = {s.index: _submit(spec, s, len(shards)) for s in shards}
        log.info("fleet %s: %d shards submitted (%s)", spec.name, len(shards), _per_family(shards))
        final = _wait(client, spec, shards, runs, pools)
    try:
        data: dict[str, ShardData] | None = shard_data(
            spec.results_location, [str(r) for r in runs.values()], started.date()
        )
    except (StoreError, UsageError) as exc:
        log.warning("the shards' results could not be read back for the summary: %s", exc)
        data = None
    outcomes = [_outcome(s, str(runs[s.index]), final[s.index], data) for s in shards]
    _publish(spec, outcomes)
    incomplete = [o for o in outcomes if not o.completed]
    points = sum(len(s.points) for s in shards)
    if incomplete:
        retry = " ".join(f"prefect flow-run retry {o.flow_run_id};" for o in incomplete)
        return Failed(message=f"{len(incomplete)} of {len(shards)} shards did not complete; re-run each alone: {retry}")
    failed = sum(o.data.failed for o in outcomes)
    return Completed(message=f"{len(shards)} shards, {points} points, {failed} failed points")


def _outcome(shard: Shard, run_id: str, final: tuple[str, str], data: dict[str, ShardData] | None) -> ShardOutcome:
    """A completed shard whose rows are not all in the dataset did not do its job: a host of another
    family (a worker in the wrong pool) leaves the points it cannot run and still completes."""
    state, message = final
    written = (data or {}).get(run_id, ShardData())
    rows = written.ok + written.failed
    if data is not None and state == StateType.COMPLETED.value and rows < len(shard.points):
        state = StateType.FAILED.value
        message = f"wrote {rows} of {len(shard.points)} rows; its log says why (a host of another family?)"
    return ShardOutcome(shard, run_id, state, message, written)


def _per_family(shards: list[Shard]) -> str:
    counts: dict[str, int] = {}
    for shard in shards:
        counts[shard.family] = counts.get(shard.family, 0) + 1
    return ", ".join(f"{family}: {n}" for family, n in counts.items())


def _pool_of(client: SyncPrefectClient, family: str) -> str:
    name = shard_deployment(family)
    try:
        deployment = client.read_deployment_by_name(name)
    except ObjectNotFound:
        raise UsageError(f"no deployment {name} for the {family} points; run `kernelsweep fleet up`") from None
    if not deployment.work_pool_name:
        raise UsageError(f"deployment {name} has no work pool; run `kernelsweep fleet up`")
    return deployment.work_pool_name


def _submit(spec: SweepSpec, shard: Shard, shards: int) -> UUID:
    run = run_deployment(
        shard_deployment(shard.family),
        parameters={
            "spec": spec.model_dump(mode="json"),
            "points": [p.model_dump(mode="json") for p in shard.points],
            "shard": shard.index,
            "shards": shards,
        },
        timeout=0,
        tags=["fleet", shard.family],
        idempotency_key=f"{flow_run.id}-shard-{shard.index}",
    )
    assert isinstance(run, FlowRun)  # called from a sync flow: Prefect runs it to completion, not a coroutine
    return run.id


def _wait(
    client: SyncPrefectClient, spec: SweepSpec, shards: list[Shard], runs: dict[int, UUID], pools: dict[str, str]
) -> dict[int, tuple[str, str]]:
    """Poll until every shard is final; returns shard index -> (state type, message)."""
    final: dict[int, tuple[str, str]] = {}
    offline_since: dict[str, float] = {}
    by_id = {run_id: index for index, run_id in runs.items()}
    while len(final) < len(shards):
        pending = [runs[i] for i in runs if i not in final]
        unstarted: dict[str, list[FlowRun]] = {}
        for run in client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=pending))):
            index = by_id[run.id]
            if run.state is not None and run.state.is_final():
                final[index] = (run.state.type.value, run.state.message or "")
            elif run.state is None or run.state.type in _UNSTARTED:
                unstarted.setdefault(shards[index].family, []).append(run)
        for family, waiting in unstarted.items():
            if workers_online(client, pools[family]):
                offline_since.pop(family, None)
                continue
            since = offline_since.setdefault(family, time.monotonic())
            if time.monotonic() - since >= spec.execution.worker_wait_seconds:
                message = (
                    f"no {family} worker online in work pool {pools[family]} for "
                    f"{spec.execution.worker_wait_seconds:g} s (execution.worker_wait_seconds); start one with "
                    f"`prefect worker start --pool {pools[family]}` and re-run this shard"
                )
                get_run_logger().error("%s (%d shards)", message, len(waiting))
                for run in waiting:
                    client.set_flow_run_state(run.id, Cancelled(message=message), force=True)
                    final[by_id[run.id]] = (StateType.CANCELLED.value, message)
        if len(final) < len(shards):
            time.sleep(POLL_SECONDS)
    return final


def workers_online(client: SyncPrefectClient, pool: str) -> list[str]:
    """The names of the pool's workers Prefect counts as online (a recent heartbeat), for the fleet
    flow's wait and for `kernelsweep fleet status` alike."""
    online = WorkerFilter(status=WorkerFilterStatus(any_=["ONLINE"]))
    return sorted(w.name for w in client.read_workers_for_work_pool(pool, worker_filter=online))


def _run_link(flow_run_id: str) -> str:
    base = PREFECT_UI_URL.value()
    return f"[{flow_run_id[:8]}]({base.rstrip('/')}/runs/flow-run/{flow_run_id})" if base else f"`{flow_run_id}`"


def _publish(spec: SweepSpec, outcomes: list[ShardOutcome]) -> None:
    """One markdown table per fleet run: per family and shard, the points and the objects written."""
    prefix = "s3://" if isinstance(spec.results_location, S3Location) else ""
    lines = [
        f"### fleet {spec.name}: {sum(o.completed for o in outcomes)} of {len(outcomes)} shards completed",
        "",
        "| family | shard | points | ok | failed | state | flow run | objects |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        objects = "<br>".join(prefix + path for path in o.data.objects) or "-"
        state = o.state.lower() + (f": {o.message}" if not o.completed and o.message else "")
        lines.append(
            f"| {o.shard.family} | {o.shard.index} | {len(o.shard.points)} | {o.data.ok} | {o.data.failed} "
            f"| {state.replace('|', '/')} | {_run_link(o.flow_run_id)} | {objects} |"
        )
    create_markdown_artifact(
        key=artifact_key("fleet", spec.name), markdown="\n".join(lines), description=f"fleet run of sweep {spec.name}"
    )
