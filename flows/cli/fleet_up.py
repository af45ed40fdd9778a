"""`kernelsweep fleet up|pause|resume`: the fleet's pools, deployments, schedule and reflexes on the
Prefect server named by PREFECT_API_URL.

`up` is idempotent. It checks the nightly spec exactly as `kernelsweep validate` does, probes its
results and artifact locations (kernelsweep.stores.probe), and refuses a spec nothing in the fleet can run
(a platform without a shard deployment; hosts that all lack the pinned versions or the real SDK),
each with one line, before it changes anything. Then it creates the pools and their queues
(kernelsweep.flows.fleet.setup), stores the nightly spec as the Prefect variable the deployments
take their default `spec` from, installs the automations (kernelsweep.flows.fleet.automations: crash
detection, shard retries, notifications), runs `prefect --no-prompt deploy --all` on the file,
sets the one nightly schedule on `fleet/fleet`, keeping it paused if it was, and has a nightly step
start its family's bisect deployment (kernelsweep.flows.fleet.bisect_trigger).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.fleet.plan import NIGHTLY_VARIABLE, FleetSettings, fleet_settings
from kernelsweep.flows.cli.fleet_status import status
from kernelsweep.flows.cli.output import console
from kernelsweep.flows.cli.prefect_client import server_client as _client
from kernelsweep.flows.cli.run import QUIET_PREFECT, load
from kernelsweep.sweepspec import SweepSpec

if TYPE_CHECKING:  # Prefect is imported only by the commands that talk to a server
    from uuid import UUID

    from prefect.client.orchestration import SyncPrefectClient

VARIABLE_LIMIT = 5000  # characters of JSON a Prefect variable holds
DEPLOY_TIMEOUT_SECONDS = 600
_BLOCK_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")  # Prefect's block type slugs and block names
SHARD_ENTRYPOINT = "kernelsweep.flows.sweep:sweep_shard"


@click.command()
@click.option("--file", "file_path", default="deployments/prefect.yaml", show_default=True, help="The prefect.yaml.")
@click.option("--spec", "spec_path", default="deployments/nightly.toml", show_default=True, help="The nightly suite.")
@click.option("--cron", help="When the nightly fleet run starts, as cron [the spec's [fleet] cron, else 0 2 * * *].")
@click.option("--timezone", help="The cron's time zone, an IANA name [the spec's [fleet] timezone, else UTC].")
@click.option(
    "--crash-after",
    type=click.IntRange(min=60),
    default=120,
    show_default=True,
    help="Seconds without a heartbeat before a running flow run is marked Crashed (`kernelsweep fleet worker`'s "
    "flow runs send one every 30 s: PREFECT_FLOWS_HEARTBEAT_FREQUENCY).",
)
@click.option(
    "--shard-retries",
    type=click.IntRange(min=0, max=10),
    default=2,
    show_default=True,
    help="How many times a crashed or failed shard is scheduled again, on any host of its family (0: never).",
)
@click.option(
    "--notify",
    metavar="BLOCK",
    help="Send regressions, nightly summaries, crashed or failed shards and fleet runs, and hosts that refuse "
    "shards through this notification block, as block-type-slug/name (e.g. slack-webhook/perf-team).",
)
@click.option("--skip-probe", is_flag=True, help="Do not write a test object to the spec's locations from here.")
def up(
    file_path: str,
    spec_path: str,
    cron: str | None,
    timezone: str | None,
    crash_after: int,
    shard_retries: int,
    notify: str | None,
    skip_probe: bool,
) -> None:
    """Create the work pools and deployments (again: it changes only what differs)."""
    from kernelsweep.flows.fleet import automations
    from kernelsweep.flows.fleet.bisect_trigger import install_bisect_triggers
    from kernelsweep.flows.fleet.setup import deployment_names, ensure_pools, reconcile_schedules

    if notify:
        _notify_form(notify)  # before any work: a malformed name would read as a server that does not answer
    spec, points = load(spec_path)
    settings = _schedule_settings(spec_path, cron, timezone)
    pools, shard_families = _pools_in(Path(file_path))
    _check_spec(spec, spec_path, shard_families, probe=not skip_probe)
    with _client() as client:
        _check_hosts(client, spec, spec_path)
        block = _notification_block(client, notify) if notify else None
        for line in ensure_pools(client, pools):
            console.print(line, highlight=False)
        _store_variable(client, spec, spec_path)
        automations.install(client, automations.crash_detection(crash_after))
        automations.install(client, automations.shard_retries(shard_retries))
        if block is not None:
            automations.install(client, automations.notifications(block))
            automations.install(client, automations.failure_notifications(block))
            automations.install(client, automations.refusal_notifications(block))
            automations.install(client, automations.retry_storm_notifications(block))
    console.print(f"nightly spec {spec.name} ({len(points)} points) stored as variable {NIGHTLY_VARIABLE}")
    _deploy(Path(file_path))
    with _client() as client:
        for line in reconcile_schedules(client, settings):
            console.print(line, highlight=False)
        deployed = {name: d.id for name, d in deployment_names(client).items()}
        for family in install_bisect_triggers(client, deployed):
            console.print(f"a new {family} step starts bisect/{family}", highlight=False)
    status.callback()  # type: ignore[misc]


@click.command()
def pause() -> None:
    """Pause the nightly schedule (it stays paused through `fleet up` until `fleet resume`)."""
    _set_nightly(False)


@click.command()
def resume() -> None:
    """Resume the nightly schedule."""
    _set_nightly(True)


def _set_nightly(active: bool) -> None:
    from kernelsweep.flows.fleet.setup import set_nightly_active

    with _client() as client:
        changed = set_nightly_active(client, active)
    for line in changed or [f"the nightly schedule is {'active' if active else 'paused'} already"]:
        console.print(line, highlight=False)


def _schedule_settings(spec_path: str, cron: str | None, timezone: str | None) -> FleetSettings:
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    settings = fleet_settings(spec_path).override(cron, timezone)
    try:
        CronSchedule(cron=settings.cron, timezone=settings.timezone)
    except ValidationError as exc:
        where = "--cron" if cron else f"{spec_path}: [fleet] cron"
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise UsageError(f"{where} {settings.cron!r}: {reason}; give five cron fields, e.g. '0 2 * * *'") from None
    return settings


def _check_spec(spec: SweepSpec, spec_path: str, shard_families: set[str], *, probe: bool) -> None:
    """Refuse a spec part of which no deployment could run, or whose locations cannot be written."""
    from kernelsweep.stores import probe_location

    missing = [p for p in spec.platforms if p not in shard_families]
    if missing:
        raise UsageError(
            f"{spec_path}: platform {missing[0]} has no sweep-shard/{missing[0]} deployment in the prefect.yaml, so "
            "nothing can run its points; remove it from platforms or add its pool and deployments"
        )
    if probe:
        probe_location(spec.results_location, "results", f"{spec_path}'s `results` (or --skip-probe)")
        probe_location(spec.artifacts_location, "artifact store", f"{spec_path}'s `artifacts` (or --skip-probe)")


def _check_hosts(client: SyncPrefectClient, spec: SweepSpec, spec_path: str) -> None:
    from kernelsweep.fleet.hosts import unrunnable
    from kernelsweep.flows.fleet.setup import reported_hosts

    problem = unrunnable(spec, reported_hosts(client))
    if problem:
        raise UsageError(f"{spec_path}: nothing in the fleet can run it: {problem}")


def _notify_form(name: str) -> tuple[str, str]:
    """(block type slug, block name) of `--notify`, in the form Prefect names blocks; UsageError otherwise."""
    slug, _, block_name = name.partition("/")
    if not (_BLOCK_NAME.fullmatch(slug) and _BLOCK_NAME.fullmatch(block_name)):
        raise UsageError(f"--notify {name!r}: give the block as block-type-slug/name, e.g. slack-webhook/perf-team")
    return slug, block_name


def _notification_block(client: SyncPrefectClient, name: str) -> UUID:
    from prefect.exceptions import ObjectNotFound

    slug, block_name = _notify_form(name)
    try:
        document = client.read_block_document_by_name(block_name, slug, include_secrets=False)
    except ObjectNotFound:
        raise UsageError(f"--notify {name}: no such block on the server; create it in the UI (Blocks) first") from None
    capabilities = document.block_schema.capabilities if document.block_schema else []
    if "notify" not in capabilities:
        raise UsageError(f"--notify {name}: a {slug} block cannot send notifications; name a notification block")
    return document.id


def _store_variable(client: SyncPrefectClient, spec: SweepSpec, spec_path: str) -> None:
    from prefect.client.schemas.actions import VariableCreate, VariableUpdate

    value = spec.model_dump(mode="json")
    size = len(json.dumps(value))
    if size > VARIABLE_LIMIT:
        raise UsageError(f"{spec_path}: the spec is {size} characters; a Prefect variable holds {VARIABLE_LIMIT}")
    if client.read_variable_by_name(NIGHTLY_VARIABLE) is None:
        client.create_variable(VariableCreate(name=NIGHTLY_VARIABLE, value=value, tags=["kernelsweep"]))
    else:
        client.update_variable(VariableUpdate(name=NIGHTLY_VARIABLE, value=value))


def _pools_in(path: Path) -> tuple[list[str], set[str]]:
    """The work pools the file names, and the families it has a shard deployment for."""
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
    shards = {str(d.get("name")) for d in deployments if d.get("entrypoint") == SHARD_ENTRYPOINT}
    return sorted({str(name) for name in names}), shards


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
