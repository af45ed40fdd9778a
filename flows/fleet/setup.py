"""What `kernelsweep fleet up` does on the server besides `prefect deploy`: pools and their queues, the
one nightly schedule, and the checks that refuse a spec nothing in the fleet can run.

- **Pools** are process pools, created when missing (an existing pool is left as its operator
  configured it). A new pool's flow runs do not stream their output through the worker: a flow run
  whose worker is killed then finishes and stores its rows instead of dying at its next log line
  (Prefect's console writes to the dead worker's pipe and exits), which measured points and threw
  them away. And each of its flow runs is Prefect's engine forked from the host's prefork server
  (`python -m kernelsweep.flows.fleet.engine`, the pool's `command`; flows/fleet/prefork.py): without
  a command, Prefect 3.9's worker starts its workspace supervisor, a second interpreter per flow run
  that runs the deployment's pull steps (the fleet has none) and then the engine, about a CPU-second
  more per shard, and the engine's own imports cost about two more. `kernelsweep fleet worker` puts
  its own interpreter first on the PATH as `python`, so the command runs where kernelsweep is installed.
  Each family pool gets an `urgent` queue (priority 1: runs started by hand, from the UI) ahead of
  `nightly` (priority 2: the scheduled fleet run's shards); a worker serves its whole pool, `urgent`
  first.
- **One nightly schedule**, on `fleet/fleet`, found by its slug: its cron and time zone are set from
  the spec's `[fleet]` table or the command line, its runs read the spec from the variable as they
  start (`spec_variable`), its active state is left as it is (a schedule
  paused with `kernelsweep fleet pause` stays paused), and every other schedule on the fleet's
  deployments is removed (Prefect itself keeps a schedule that `prefect.yaml` no longer declares).
"""

from __future__ import annotations

from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.actions import DeploymentScheduleCreate, DeploymentUpdate, WorkPoolCreate
from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterTags, FlowRunFilter
from prefect.client.schemas.responses import DeploymentResponse
from prefect.client.schemas.schedules import CronSchedule
from prefect.client.schemas.sorting import FlowRunSort
from prefect.exceptions import ObjectNotFound

from kernelsweep.fleet import HostReport
from kernelsweep.fleet.plan import FLEET_DEPLOYMENT, NIGHTLY_VARIABLE, POOL_PREFIX, QUEUES, FleetSettings

NIGHTLY_SLUG = "kernelsweep-nightly"
# The nightly run reads its spec from the variable as it starts (kernelsweep.flows.fleet.nightly_spec).
NIGHTLY_PARAMETERS = {"spec_variable": NIGHTLY_VARIABLE}
CONTROL_POOL = f"{POOL_PREFIX}control"
RECENT_SHARDS = 200  # shard runs read for what the fleet's hosts last reported
# Prefect's engine, forked from the host's prefork server; `python`: the worker's own (cli.fleet_worker)
ENGINE_COMMAND = "python -m kernelsweep.flows.fleet.engine"


def process_pool_template() -> dict:
    """Prefect's process job template, its flow runs' output not streamed through the worker, each
    flow run Prefect's engine alone. Prefect's workers are imported here, not with the module: every
    forked shard imports this module (through the compile farm's) and never needs them."""
    from prefect.workers.process import ProcessWorker

    template = ProcessWorker.get_default_base_job_template()
    template["variables"]["properties"]["stream_output"]["default"] = False
    template["variables"]["properties"]["command"]["default"] = ENGINE_COMMAND
    return template


def ensure_pools(client: SyncPrefectClient, pools: list[str]) -> list[str]:
    """Create missing pools, and the family pools' missing queues; one line per thing made."""
    made = []
    for pool in pools:
        try:
            client.read_work_pool(pool)
        except ObjectNotFound:
            template = process_pool_template()
            client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template))
            made.append(f"created work pool {pool}")
        if pool == CONTROL_POOL:
            continue
        have = {queue.name for queue in client.read_work_queues(work_pool_name=pool)}
        for queue, priority in QUEUES.items():
            if queue not in have:
                client.create_work_queue(name=queue, work_pool_name=pool, priority=priority)
                made.append(f"created queue {queue} (priority {priority}) in {pool}")
    return made


def ours() -> DeploymentFilter:
    return DeploymentFilter(tags=DeploymentFilterTags(all_=["kernelsweep"]))


def deployment_names(client: SyncPrefectClient) -> dict[str, DeploymentResponse]:
    """`flow/deployment` -> deployment, for the fleet's deployments."""
    found = client.read_deployments(deployment_filter=ours())
    flows = {flow_id: client.read_flow(flow_id).name for flow_id in {d.flow_id for d in found}}
    return {f"{flows[d.flow_id]}/{d.name}": d for d in found}


def reconcile_schedules(client: SyncPrefectClient, settings: FleetSettings) -> list[str]:
    """The nightly schedule on fleet/fleet as `settings` say (its paused state kept); no other schedule."""
    wanted = CronSchedule(cron=settings.cron, timezone=settings.timezone)
    lines, kept = [], False
    for name, deployment in sorted(deployment_names(client).items()):
        for schedule in client.read_deployment_schedules(deployment.id):
            if name == FLEET_DEPLOYMENT and schedule.slug == NIGHTLY_SLUG and not kept:
                kept = True
                if schedule.schedule != wanted or schedule.parameters != NIGHTLY_PARAMETERS:
                    client.update_deployment_schedule(
                        deployment.id, schedule.id, schedule=wanted, parameters=NIGHTLY_PARAMETERS
                    )
                    lines.append(f"nightly schedule of {name} is now {settings.cron} ({settings.timezone})")
                continue
            client.delete_deployment_schedule(deployment.id, schedule.id)
            lines.append(f"removed schedule {_describe(schedule.schedule)} from {name}")
        if name == FLEET_DEPLOYMENT and not kept:
            nightly = DeploymentScheduleCreate(
                schedule=wanted, active=True, slug=NIGHTLY_SLUG, parameters=NIGHTLY_PARAMETERS
            )
            client.create_deployment_schedules(deployment.id, [nightly])
            lines.append(f"nightly schedule of {name}: {settings.cron} ({settings.timezone})")
            kept = True
    return lines


def set_nightly_active(client: SyncPrefectClient, active: bool) -> list[str]:
    """Pause or resume the nightly schedule; returns what changed. A resumed schedule's deployment is
    touched as well: Prefect's scheduler plans a deployment within seconds only when the deployment
    itself changed (its recent-deployments pass), and a schedule edit alone waited for its full pass, a
    minute, before the UI showed the next nightly runs."""
    fleet = deployment_names(client).get(FLEET_DEPLOYMENT)
    if fleet is None:
        return []
    changed = []
    for schedule in client.read_deployment_schedules(fleet.id):
        if schedule.active != active:  # its parameters sent back: Prefect's server sets omitted ones to {}
            client.update_deployment_schedule(fleet.id, schedule.id, active=active, parameters=schedule.parameters)
            changed.append(f"{'resumed' if active else 'paused'} {FLEET_DEPLOYMENT} {_describe(schedule.schedule)}")
    if active and changed:
        client.update_deployment(fleet.id, DeploymentUpdate(description=fleet.description))
    return changed


def reported_hosts(client: SyncPrefectClient) -> list[HostReport]:
    """What each host said at the start of its latest shard (the newest report per host wins)."""
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    runs = client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=["sweep-shard"])),
        flow_run_filter=FlowRunFilter(),
        sort=FlowRunSort.START_TIME_DESC,
        limit=RECENT_SHARDS,
    )
    latest: dict[str, HostReport] = {}
    for run in runs:
        report = HostReport.from_labels(run.labels)
        if report is not None and report.host not in latest:
            latest[report.host] = report
    return list(latest.values())


def _describe(schedule: object) -> str:
    if isinstance(schedule, CronSchedule):
        return f"{schedule.cron} ({schedule.timezone or 'UTC'})"
    return type(schedule).__name__
