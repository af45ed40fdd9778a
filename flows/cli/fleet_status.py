"""`kernelsweep fleet status`: what an operator checks in the morning, in one command.

The nightly schedule (and whether it is paused), each pool (paused or not, its queues, the workers
online and those gone), the shards running now with their progress (a shard whose host is gone says
so: it is waiting for the crash automation, not measuring), the last night's fleet run per family,
and the next scheduled runs. A worker is gone once its heartbeat has stopped: its last one is older
than GONE_HEARTBEATS of its own heartbeat intervals (and GONE_FLOOR_SECONDS), which is a beat missed
outright, where Prefect marks it offline only after three (about 90 s after it died, measured). A
worker stopped on purpose is gone too; one gone for a day is history and no longer listed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click
from rich.table import Table

from kernelsweep.fleet import HostReport
from kernelsweep.fleet.cost import COMPILE
from kernelsweep.fleet.plan import FLEET_DEPLOYMENT, POOL_PREFIX
from kernelsweep.flows.cli.output import out
from kernelsweep.flows.cli.prefect_client import server_client
from kernelsweep.platforms import PLATFORM_NAMES

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun, Worker

GONE_HEARTBEATS = 2
GONE_FLOOR_SECONDS = 15.0  # a busy host's heartbeat a few seconds behind is not news
DEFAULT_HEARTBEAT_SECONDS = 30
HISTORY_SECONDS = 24 * 3600  # a worker gone for a day is history, not news


@click.command()
def status() -> None:
    """The nightly schedule, pools and late hosts, running shards, last night per family, next runs."""
    with server_client() as client:
        out.print(_schedule_table(client))
        pools, gone = _pools_table(client)
        out.print(pools)
        out.print(_running_table(client, gone))
        for line in _last_night(client):
            out.print(line, highlight=False, soft_wrap=True)
        out.print(_upcoming_table(client))


def _schedule_table(client: SyncPrefectClient) -> Table:
    from kernelsweep.flows.fleet.setup import deployment_names

    table = Table(title="nightly schedule")
    for column in ("deployment", "cron", "time zone", "state"):
        table.add_column(column)
    fleet = deployment_names(client).get(FLEET_DEPLOYMENT)
    for schedule in client.read_deployment_schedules(fleet.id) if fleet else []:
        cron = getattr(schedule.schedule, "cron", type(schedule.schedule).__name__)
        zone = getattr(schedule.schedule, "timezone", None) or "UTC"
        state = "active" if schedule.active else "PAUSED (kernelsweep fleet resume)"
        table.add_row(FLEET_DEPLOYMENT, cron, zone, state)
    return table


def _pools_table(client: SyncPrefectClient) -> tuple[Table, dict[str, str]]:
    """The pools, and every gone worker's name with how long it has been silent."""
    table = Table(title="work pools")
    for column in ("pool", "status", "queues", "workers online", "gone (heartbeat stopped)"):
        table.add_column(column)
    now = datetime.now(UTC)
    silent: dict[str, str] = {}
    for pool in sorted((p for p in client.read_work_pools() if p.name.startswith(POOL_PREFIX)), key=lambda p: p.name):
        state = "PAUSED" if pool.is_paused else (pool.status.value.lower() if pool.status else "-")
        queues = ", ".join(
            f"{q.name} {q.priority}" + (" PAUSED" if q.is_paused else "")
            for q in sorted(client.read_work_queues(work_pool_name=pool.name), key=lambda q: q.priority)
        )
        online, gone = liveness(client.read_workers_for_work_pool(pool.name), now)
        silent.update(gone)
        names = f" ({', '.join(online)})" if online else ""
        gone_here = ", ".join(f"{name} ({silence})" for name, silence in gone.items()) or "-"
        table.add_row(pool.name, state, queues, f"{len(online)}{names}", gone_here)
    return table, silent


def liveness(workers: Iterable[Worker], now: datetime) -> tuple[list[str], dict[str, str]]:
    """The workers online, and those gone with how long they have been silent (`silent 75 s`): gone once
    their heartbeat has stopped, whatever Prefect's status says yet."""
    online, gone = [], {}
    for worker in workers:
        age = (now - worker.last_heartbeat_time).total_seconds() if worker.last_heartbeat_time else None
        interval = worker.heartbeat_interval_seconds or DEFAULT_HEARTBEAT_SECONDS
        if age is not None and age > max(GONE_HEARTBEATS * interval, GONE_FLOOR_SECONDS):
            if age < HISTORY_SECONDS:
                gone[worker.name] = f"silent {age:.0f} s"
        elif worker.status and worker.status.value == "ONLINE":
            online.append(worker.name)
    return sorted(online), dict(sorted(gone.items()))


def _running_table(client: SyncPrefectClient, gone: dict[str, str]) -> Table:
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterType,
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    running = client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=["sweep-shard"])),
        flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING]))),
    )
    progress = {}
    if running:
        ids = ArtifactFilterFlowRunId(any_=[r.id for r in running])
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ids, type=ArtifactFilterType(any_=["progress"]))
        )
        progress = {a.flow_run_id: a.description or f"{a.data}%" for a in artifacts}
    table = Table(title="running shards")
    for column in ("shard", "host", "progress", "attempt", "since"):
        table.add_column(column)
    for run in sorted(running, key=lambda r: r.name):
        since = run.start_time.isoformat(timespec="minutes") if run.start_time else "-"
        table.add_row(run.name, host_cell(run.labels, gone), progress.get(run.id, "-"), str(run.run_count), since)
    return table


def host_cell(labels: Mapping[str, object], gone: Mapping[str, str]) -> str:
    """A running shard's host, `trn2-a (gone, silent 75 s)` once its heartbeat stopped: the shard is not
    measuring but waiting for the crash automation (`fleet up --crash-after`) to retry it elsewhere."""
    host = HostReport.from_labels(labels)
    name = host.host if host else "-"
    return f"{name} (gone, {gone[name]})" if name in gone else name


def _last_night(client: SyncPrefectClient) -> list[str]:
    """The last fleet run (the last scheduled one, if any ran) and its shards' outcome per family."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    run = _last_fleet_run(client, scheduled=True) or _last_fleet_run(client, scheduled=False)
    if run is None:
        return ["last fleet run: none yet"]
    state = run.state.name if run.state else "-"
    message = f": {run.state.message}" if run.state and run.state.message else ""
    when = run.start_time.isoformat(timespec="minutes") if run.start_time else "not started"
    lines = [f"last fleet run: {run.name} ({run.id}) {state} at {when}{message}"]
    shards = client.read_flow_runs(
        flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id]))
    )
    families: dict[str, list[FlowRun]] = {}
    for shard in shards:
        family = next((t for t in shard.tags if t in PLATFORM_NAMES), "-")
        family = COMPILE if COMPILE in shard.tags else family  # the compile farm's shards, on a line of their own
        families.setdefault(family, []).append(shard)
    for family, runs in sorted(families.items()):
        done = sum(1 for r in runs if r.state and r.state.type.value == "COMPLETED")
        hosts = sorted({h.host for r in runs if (h := HostReport.from_labels(r.labels))})
        others = ", ".join(f"{r.name} {r.state.name}" for r in runs if r.state and r.state.type.value != "COMPLETED")
        lines.append(
            f"  {family}: {done} of {len(runs)} shards completed on {', '.join(hosts) or '-'}"
            + (f"; {others}" if others else "")
        )
    return lines


def _last_fleet_run(client: SyncPrefectClient, *, scheduled: bool) -> FlowRun | None:
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    started = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(not_any_=[StateType.SCHEDULED])))
    runs = client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=["fleet"])),
        flow_run_filter=started,
        sort=FlowRunSort.START_TIME_DESC,
        limit=50,
    )
    return next((r for r in runs if r.auto_scheduled or not scheduled), None)


def _upcoming_table(client: SyncPrefectClient) -> Table:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    from kernelsweep.flows.fleet.setup import deployment_names, ours

    names = {d.id: name for name, d in deployment_names(client).items()}
    scheduled = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])))
    upcoming = client.read_flow_runs(
        flow_run_filter=scheduled, deployment_filter=ours(), sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=10
    )
    table = Table(title="next scheduled runs")
    for column in ("deployment", "expected start", "flow run"):
        table.add_column(column)
    for run in upcoming:
        start = run.expected_start_time.isoformat(timespec="minutes") if run.expected_start_time else "-"
        table.add_row(names.get(run.deployment_id, "-") if run.deployment_id else "-", start, run.name)
    return table
