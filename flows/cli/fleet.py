"""`kernelsweep fleet up` and `kernelsweep fleet status`: the fleet's pools and deployments on the
Prefect server named by PREFECT_API_URL.

`up` is idempotent: it creates the work pools `deployments/prefect.yaml` names (process pools; an
existing pool is left as its operator configured it), stores the nightly spec as the Prefect
variable the deployments take their default `spec` from, and runs `prefect --no-prompt deploy
--all` on the file (Prefect updates deployments that exist). The spec is checked first, exactly as
`kernelsweep validate` checks it, so a bad nightly suite never reaches the server.

It also installs one automation: a flow run whose host vanished (power loss, a terminated instance,
an OOM kill) sends no more heartbeats, and the open-source server does nothing about that by
itself; the automation marks such a run Crashed after `--crash-after` seconds of silence, so its
fleet run finishes and the shard can be re-run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml
from rich.table import Table

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.fleet import POOL_PREFIX, refuse_searches
from kernelsweep.flows.cli.output import console, out
from kernelsweep.flows.cli.run import QUIET_PREFECT, load

if TYPE_CHECKING:  # Prefect is imported only by the commands that talk to a server
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import DeploymentFilter

NIGHTLY_VARIABLE = "kernelsweep_nightly_spec"  # prefect.yaml: "{{ prefect.variables.kernelsweep_nightly_spec }}"
VARIABLE_LIMIT = 5000  # characters of JSON a Prefect variable holds
DEPLOY_TIMEOUT_SECONDS = 600
CRASH_AUTOMATION = "kernelsweep: crash flow runs whose host went silent"
ENDED = ("Completed", "Failed", "Cancelled", "Crashed")


@click.group()
def fleet() -> None:
    """Set up and inspect the fleet: work pools, deployments, workers (against PREFECT_API_URL)."""


@fleet.command()
@click.option("--file", "file_path", default="deployments/prefect.yaml", show_default=True, help="The prefect.yaml.")
@click.option("--spec", "spec_path", default="deployments/nightly.toml", show_default=True, help="The nightly suite.")
@click.option(
    "--crash-after",
    type=click.IntRange(min=60),
    default=600,
    show_default=True,
    help="Seconds without a heartbeat before a running flow run is marked Crashed (workers send one every "
    "PREFECT_FLOWS_HEARTBEAT_FREQUENCY seconds, 180 by default).",
)
def up(file_path: str, spec_path: str, crash_after: int) -> None:
    """Create the work pools and deployments (again: it changes only what differs)."""
    spec, points = load(spec_path)
    refuse_searches(spec, spec_path)
    pools = _pools_in(Path(file_path))
    value = spec.model_dump(mode="json")
    size = len(json.dumps(value))
    if size > VARIABLE_LIMIT:
        raise UsageError(f"{spec_path}: the spec is {size} characters; a Prefect variable holds {VARIABLE_LIMIT}")
    with _client() as client:
        from prefect.client.schemas.actions import VariableCreate, VariableUpdate, WorkPoolCreate
        from prefect.exceptions import ObjectNotFound
        from prefect.workers.process import ProcessWorker

        for pool in pools:
            try:
                client.read_work_pool(pool)
            except ObjectNotFound:
                template = ProcessWorker.get_default_base_job_template()
                client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template))
                console.print(f"created work pool {pool}", highlight=False)
        if client.read_variable_by_name(NIGHTLY_VARIABLE) is None:
            client.create_variable(VariableCreate(name=NIGHTLY_VARIABLE, value=value, tags=["kernelsweep"]))
        else:
            client.update_variable(VariableUpdate(name=NIGHTLY_VARIABLE, value=value))
        _crash_detection(client, crash_after)
    console.print(f"nightly spec {spec.name} ({len(points)} points) stored as variable {NIGHTLY_VARIABLE}")
    _deploy(Path(file_path))
    status.callback()  # type: ignore[misc]


def _crash_detection(client: SyncPrefectClient, seconds: int) -> None:
    """Prefect's zombie-run recipe: after a run starts or beats, expect a beat (or its end) in time."""
    from datetime import timedelta

    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    automation = AutomationCore(
        name=CRASH_AUTOMATION,
        description="A flow run with no heartbeat for this long lost its host: mark it Crashed.",
        trigger=EventTrigger(
            match={"prefect.resource.id": "prefect.flow-run.*"},
            after={"prefect.flow-run.Running", "prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", *(f"prefect.flow-run.{state}" for state in ENDED)},
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=seconds),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                force=True,  # a Running run: no orchestration rule may keep it there
                message=f"no heartbeat for {seconds} s: the host running this flow run is gone; re-run it with "
                "`prefect flow-run retry ID`",
            )
        ],
    )
    existing = client.read_automations_by_name(CRASH_AUTOMATION)
    if existing:
        client.update_automation(existing[0].id, automation)
    else:
        client.create_automation(automation)


def _pools_in(path: Path) -> list[str]:
    try:
        config = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; run from the repository root or pass --file") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({' '.join(str(exc).split())}); fix the syntax") from None
    deployments = config.get("deployments") if isinstance(config, dict) else None
    if not deployments:
        raise UsageError(f"{path}: no deployments; give the fleet's prefect.yaml")
    names = [(d.get("work_pool") or {}).get("name") for d in deployments]
    if not all(isinstance(name, str) and name for name in names):
        raise UsageError(f"{path}: every deployment needs work_pool.name")
    return sorted({str(name) for name in names})


def _deploy(path: Path) -> None:
    """Prefect's own deploy, quietly: its output is shown only when it fails. `-P`: the folder it runs
    in is not put first on the import path (Prefect adds it itself later, to load file entrypoints)."""
    argv = [sys.executable, "-P", "-m", "prefect", "--no-prompt", "deploy", "--all"]
    argv += ["--prefect-file", str(path.resolve())]
    env = {**QUIET_PREFECT, **os.environ}
    try:
        done = subprocess.run(
            argv, cwd=path.resolve().parent, env=env, capture_output=True, text=True, timeout=DEPLOY_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise KernelsweepError(f"`prefect deploy` took over {DEPLOY_TIMEOUT_SECONDS} s; check the server") from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        raise KernelsweepError(f"`prefect deploy --all` failed: {lines[-1] if lines else done.returncode}")


@fleet.command()
def status() -> None:
    """Pools, workers online per family, the next scheduled runs and the last fleet run."""
    with _client() as client:
        out.print(_pools_table(client))
        out.print(_upcoming_table(client))
        out.print(_last_fleet_run(client), highlight=False, soft_wrap=True)


def _pools_table(client: SyncPrefectClient) -> Table:
    from kernelsweep.flows.fleet import workers_online

    table = Table(title="work pools")
    for column in ("pool", "type", "status", "workers online"):
        table.add_column(column)
    pools = [p for p in client.read_work_pools() if p.name.startswith(POOL_PREFIX)]
    for pool in sorted(pools, key=lambda p: p.name):
        online = workers_online(client, pool.name)
        state = pool.status.value.lower() if pool.status else "-"
        table.add_row(pool.name, pool.type, state, f"{len(online)}" + (f" ({', '.join(online)})" if online else ""))
    return table


def _upcoming_table(client: SyncPrefectClient) -> Table:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    ours = _our_deployments()
    found = client.read_deployments(deployment_filter=ours)
    flows = {flow_id: client.read_flow(flow_id).name for flow_id in {d.flow_id for d in found}}
    deployments = {d.id: f"{flows[d.flow_id]}/{d.name}" for d in found}
    scheduled = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])))
    upcoming = client.read_flow_runs(
        flow_run_filter=scheduled, deployment_filter=ours, sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=10
    )
    table = Table(title="next scheduled runs")
    for column in ("deployment", "expected start", "flow run"):
        table.add_column(column)
    for run in upcoming:
        start = run.expected_start_time.isoformat(timespec="minutes") if run.expected_start_time else "-"
        table.add_row(deployments.get(run.deployment_id, "-") if run.deployment_id else "-", start, run.name)
    return table


def _last_fleet_run(client: SyncPrefectClient) -> str:
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
    last = client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=["fleet"])),
        flow_run_filter=started,
        sort=FlowRunSort.START_TIME_DESC,
        limit=1,
    )
    if not last:
        return "last fleet run: none yet"
    run = last[0]
    state = run.state.name if run.state else "-"
    message = f": {run.state.message}" if run.state and run.state.message else ""
    when = run.start_time.isoformat(timespec="minutes") if run.start_time else "not started"
    return f"last fleet run: {run.name} ({run.id}) {state} at {when}{message}"


def _our_deployments() -> DeploymentFilter:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterTags

    return DeploymentFilter(tags=DeploymentFilterTags(all_=["kernelsweep"]))


@contextmanager
def _client() -> Iterator[SyncPrefectClient]:
    """A client of the server in PREFECT_API_URL (never an ephemeral one), checked to answer."""
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise UsageError("PREFECT_API_URL is not set; point it at the fleet's server, e.g. http://prefect:4200/api")
    with get_client(sync_client=True) as client:
        error = client.api_healthcheck()
        if error is not None:
            raise KernelsweepError(f"the Prefect server at {url} does not answer ({error}); start it or fix the URL")
        yield client
