"""The `fleet` flow: one sweep shared by every host of every family; the nightly suite.

It runs on the small control pool, at most one at a time (the deployment's concurrency limit: a
second fleet run waits, so two nights never double-book the hosts). The spec is expanded once here;
each family's points are cut into shards (`kernelsweep.fleet.plan.plan_shards`) and every shard becomes a
flow run of that family's `sweep-shard/<family>` deployment, so the family's work pool hands shards
to whichever of its hosts is free: on the pool's `nightly` queue for the scheduled nightly run, on
`urgent` (served first) for a run started by hand. The fleet run then waits and finally publishes one
summary, read from the dataset, and compacts the nights before its own.

- A spec's searches run as K search shards per family (`kernelsweep.fleet.plan.plan_search_shards`)
  on the fleet run's shared studies, submitted first and straight to their pools; once every shard
  is done, each searched shape's winner is confirmed by contests on the family's hosts and recorded
  in the tuned store (docs/fleet.md, "A search on the fleet").

- Shards are submitted with an idempotency key derived from this flow run, so a retried fleet run
  finds its shards again instead of starting a second set.
- A shard that crashed or failed is scheduled again by the server (kernelsweep.flows.fleet.automations)
  a bounded number of times, on any host of its family, and resumes from its journal
  (kernelsweep.flows.fleet.shard); the wait (kernelsweep.flows.fleet.wait) counts those retries in.
- With a compile farm online (kernelsweep.flows.fleet.farm), each shard's points are traced and compiled
  on its CPU hosts first, and the shard starts on its family's pool as soon as its NEFFs exist.
- The run fails, naming each shard that did not complete and why (a host in the wrong pool, a host
  with other SDK versions than the run requires), when one still has not after its retries; it fails
  at once, starting no shard, when the versions it pins (`require`, perhaps set in the run form) are
  on no host of a family as its hosts last reported them.
"""

from __future__ import annotations

from datetime import date
from functools import partial
from uuid import UUID

from prefect import flow, get_client, get_run_logger
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run
from prefect.states import Completed, Failed, State

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.fleet import Shard, ShardData, plan_search_shards, plan_shards, shard_data, shard_deployment
from kernelsweep.fleet.cost import COMPILE
from kernelsweep.fleet.hosts import HostReport, attempt_hosts, describe, disagreements, unrunnable
from kernelsweep.flows.fleet.automations import retries_installed
from kernelsweep.flows.fleet.farm import farm_online, stream
from kernelsweep.flows.fleet.nightly_spec import live_spec
from kernelsweep.flows.fleet.recheck import nightly_recheck, on_family_hosts
from kernelsweep.flows.fleet.setup import reported_hosts
from kernelsweep.flows.fleet.summary import Attempt, ShardOutcome, publish, run_cost, shard_runs
from kernelsweep.flows.fleet.wait import ShardWait
from kernelsweep.results.compact import compact
from kernelsweep.sweepspec import SweepSpec, expand_spec


@flow(name="fleet", flow_run_name="fleet-{spec.name}")
def fleet(spec: SweepSpec, spec_variable: str = "") -> State:
    """Run a sweep across the fleet: each platform's points in shards on that platform's work pool.

    Args:
        spec: The sweep: kernels, parameter grid, dtypes, platforms, capture settings, locations.
        spec_variable: Read the spec from this Prefect variable as the run starts, instead of `spec`
            (the nightly schedule names kernelsweep_nightly_spec: an edit of it applies the next night);
            empty: run `spec`.
    """
    spec = live_spec(spec, spec_variable)
    log = get_run_logger()
    expansion = expand_spec(spec)
    per_run = spec.execution.max_points_per_flow_run
    shards = plan_shards(expansion.points, per_run)
    shards += plan_search_shards(expansion.targets, per_run, len(shards))
    with get_client(sync_client=True) as client:
        unmeetable = unrunnable(spec, reported_hosts(client))  # a pin set in the run form, before any shard
        if unmeetable:
            return Failed(message=f"nothing in the fleet can run {spec.name}: {unmeetable}; no shard was started")
        this = client.read_flow_run(UUID(str(flow_run.id)))
        pools = {family: _pool_of(client, family) for family in {s.family for s in shards}}
        queue = "nightly" if this.auto_scheduled else "urgent"
        retries = retries_installed(client)
        runs = _start(client, spec, shards, queue, retries)
        log.info("fleet %s: %d shards submitted to the %s queues (%s)", spec.name, len(shards), queue, _count(shards))
        final = ShardWait(client, spec, shards, runs).until_done(pools, retries)
        children = shard_runs(client, this.id)
        cost = run_cost(client, children)
    hosts, attempts, compiles = _host_reports(children, set(runs.values()))
    night = this.created.date() if this.created else date.today()
    data = _read_back(spec, [str(r) for r in runs.values()], night)
    outcomes = [
        _outcome(s, str(runs[s.index]), final[s.index], data, hosts.get(runs[s.index]), attempts[runs[s.index]],
                 compiles.get(s.index, ()))
        for s in shards
    ]  # fmt: skip
    flags = describe(disagreements(hosts.values()))
    for line in flags:
        log.warning(line)
    publish(spec, outcomes, flags, cost)
    if expansion.targets:  # the searches' winners, confirmed on the families' hosts, into the tuned store
        from kernelsweep.flows.contest import confirm_searches  # the report's modules: a search's run only

        searched = {o.flow_run_id for o in outcomes if o.shard.search}
        confirm_searches(spec, expansion.targets, searched, run=on_family_hosts(queue))
    _compact(spec, night)
    nightly_recheck(spec, on_family_hosts(queue))
    return _final_state(outcomes, flags)


def _start(
    client: SyncPrefectClient, spec: SweepSpec, shards: list[Shard], queue: str, retries: int
) -> dict[int, UUID]:
    """The capture shards' flow runs by index: through the compile farm while a compile worker is
    online (kernelsweep.flows.fleet.farm), else straight to the families' pools. Search shards go
    straight to their pools: their trials are not known before their studies propose them, so each
    sends its batches to the farm itself (kernelsweep.flows.fleet.shard.farm_first)."""
    submit = partial(_submit, spec, shards=len(shards), queue=queue)
    runs = {s.index: submit(s) for s in shards if s.search}
    grid = [s for s in shards if not s.search]  # numbered first: the farm's stream finds each by its index
    if grid and farm_online(client):
        return runs | stream(client, spec, grid, queue, retries, submit)
    return runs | {s.index: submit(s) for s in grid}


def _final_state(outcomes: list[ShardOutcome], flags: list[str]) -> State:
    incomplete = [o for o in outcomes if not o.completed]
    if incomplete:
        reasons = "; ".join(
            f"shard {o.shard.index} ({o.shard.family}, {o.flow_run_id}) {o.state.lower()}: {o.message}"
            for o in incomplete
        )
        return Failed(
            message=f"{len(incomplete)} of {len(outcomes)} shards did not complete: {reasons} (after its retries; "
            "`prefect flow-run retry ID` re-runs one, and this fleet run finishes once all have completed)"
        )
    points = sum(len(o.shard.points) for o in outcomes)
    failed = sum(o.data.failed for o in outcomes)
    retried = [f"shard {o.shard.index} ({o.shard.family}) after {o.retried()}" for o in outcomes if o.retried()]
    refused = [line for o in outcomes for line in o.unfinished(capture=False)]
    flags = [*flags, *([f"{len(retried)} shards completed on a retry: {'; '.join(retried)}"] if retried else [])]
    flags += [f"compile attempts that did not complete: {'; '.join(refused)}"] if refused else []
    flagged = f"; {'; '.join(flags)}" if flags else ""
    return Completed(message=f"{len(outcomes)} shards, {points} points, {failed} failed points{flagged}")


def _outcome(
    shard: Shard,
    run_id: str,
    final: tuple[str, str],
    data: dict[str, ShardData] | None,
    host: HostReport | None,
    attempts: tuple[Attempt, ...],
    compile_attempts: tuple[Attempt, ...],
) -> ShardOutcome:
    """A completed shard whose rows are not all in the dataset did not do its job (a search shard's
    rows are the trials it took, however many)."""
    state, message = final
    written = (data or {}).get(run_id, ShardData())
    rows = written.ok + written.failed
    short = rows < len(shard.points) and not shard.search
    if data is not None and state == StateType.COMPLETED.value and short:
        state = StateType.FAILED.value
        message = f"wrote {rows} of {len(shard.points)} rows; its log says why"
    return ShardOutcome(shard, run_id, state, message, written, host, attempts, compile_attempts)


def _read_back(spec: SweepSpec, run_ids: list[str], night: date) -> dict[str, ShardData] | None:
    try:
        return shard_data(spec.results_location, run_ids, night)
    except KernelsweepError as exc:
        get_run_logger().warning("the shards' results could not be read back for the summary: %s", exc)
        return None


def _compact(spec: SweepSpec, night: date) -> None:
    """The nights before this one, each partition as one object (kernelsweep.results.compact)."""
    try:
        done = compact(spec.results_location, before=night)
    except KernelsweepError as exc:
        get_run_logger().warning("compacting the results before %s failed (%s); the next run tries again", night, exc)
        return
    if done:
        replaced = sum(part.replaced for part in done)
        get_run_logger().info("compacted %d partitions dated before %s (%d objects)", len(done), night, replaced)


def _host_reports(
    children: list[tuple[FlowRun, list[State]]], captures: set[UUID]
) -> tuple[dict[UUID, HostReport], dict[UUID, tuple[Attempt, ...]], dict[int, tuple[Attempt, ...]]]:
    """What the last host of each capture shard reported, every attempt of it (host and how it ended),
    and every attempt of each shard's compile run on the farm, by shard index."""
    reports: dict[UUID, HostReport] = {}
    attempts: dict[UUID, tuple[Attempt, ...]] = {run_id: () for run_id in captures}
    compiles: dict[int, tuple[Attempt, ...]] = {}
    for run, states in children:
        tried = _attempts(attempt_hosts(run.labels), states)
        if run.id in captures:
            attempts[run.id] = tried
            if (report := HostReport.from_labels(run.labels)) is not None:
                reports[run.id] = report
        elif COMPILE in run.tags and isinstance(run.parameters.get("shard"), int):
            compiles[run.parameters["shard"]] = tried
    return reports, attempts, compiles


def _attempts(hosts: list[str], states: list[State]) -> tuple[Attempt, ...]:
    """Each attempt's host with the first end state after its Running: Crashed, Failed (a refusal says
    why), Cancelled or Completed; "running" for one still going."""
    ends: list[str] = []
    started = 0
    for state in sorted(states, key=lambda s: s.timestamp):
        if state.type == StateType.RUNNING:
            started += 1
        elif started > len(ends) and state.type in _ENDS:
            said = f": {state.message}" if state.message and state.type != StateType.COMPLETED else ""
            ends.append(f"{state.type.value.lower()}{said}")
    return tuple(Attempt(host, ends[i] if i < len(ends) else "running") for i, host in enumerate(hosts))


_ENDS = {StateType.CRASHED, StateType.FAILED, StateType.CANCELLED, StateType.COMPLETED}


def _count(shards: list[Shard]) -> str:
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


def _submit(spec: SweepSpec, shard: Shard, shards: int, queue: str) -> UUID:
    run = run_deployment(
        shard_deployment(shard.family),
        parameters={
            "spec": spec.model_dump(mode="json"),
            "points": [p.model_dump(mode="json") for p in shard.points],
            "shard": shard.index,
            "shards": shards,
            "fleet_run_id": str(flow_run.id),
            "search": shard.search,
        },
        timeout=0,
        tags=["fleet", shard.family, *(["search"] if shard.search else [])],
        idempotency_key=f"{flow_run.id}-shard-{shard.index}",
        work_queue_name=queue,
    )
    assert isinstance(run, FlowRun)  # called from a sync flow: Prefect runs it to completion, not a coroutine
    return run.id
