"""`kernelsweep server start|stop|status`: one local Prefect server in the background for repeated runs.

Without PREFECT_API_URL, every `kernelsweep run` starts a Prefect server of its own first (about 10 s
here, nearer 20 s on a fresh Prefect home) and stops it at exit. With this server running and its API
URL exported, a run connects at once and its flow and task runs stay browsable in the UI. The server
is `prefect server start`, started in its own session by `kernelsweep.flows.server` (the one launcher),
logs to a file in the Prefect home and is recorded there (pid, port), so `stop` and `status` find it
from any shell. It keeps a bounded database: finished flow runs older than a week are vacuumed (events
are after a week by default) unless the environment says otherwise (docs/fleet.md, "Database retention
and server sizing"), and records task runs and events in batches (`BATCHED_RECORDING_SETTINGS`).
Its database is SQLite in the Prefect home unless `--database` (or PREFECT_API_DATABASE_CONNECTION_URL)
names a PostgreSQL (kernelsweep.flows.cli.database_url), which a server several workers write to
needs (docs/fleet.md, "When SQLite stops being enough"); `--fleet` without a URL starts a private
PostgreSQL for it (kernelsweep.flows.postgres), which `stop` stops too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from kernelsweep.errors import UsageError
from kernelsweep.flows import server as launcher
from kernelsweep.flows.cli.database_url import checked_database_url, shown
from kernelsweep.flows.cli.output import console, out
from kernelsweep.flows.postgres import Cluster, cluster_for

STATE_FILE, LOG_FILE = "kernelsweep-server.json", "kernelsweep-server.log"
DATABASE_ENV = "PREFECT_API_DATABASE_CONNECTION_URL"
DEFAULT_PORT = 4200
WEEK_SECONDS = str(7 * 24 * 3600)
# What a local server runs with unless the environment already says: quiet, no telemetry, and a
# database that stays bounded however many sweeps it records.
SERVER_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED": "events,flow_runs",
    "PREFECT_SERVER_SERVICES_DB_VACUUM_RETENTION_PERIOD": WEEK_SECONDS,
}


@dataclass(frozen=True)
class LocalServer:
    """What `start` records in the Prefect home, so `stop` and `status` find it from any shell."""

    pid: int
    host: str
    port: int
    log: str
    database: str = "SQLite in the Prefect home"  # as it may be shown: no password
    cluster: str | None = None  # the private PostgreSQL's folder that `stop` stops (`--fleet`)

    @property
    def api_url(self) -> str:
        return launcher.api_url(self.host, self.port)

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def healthy(self) -> bool:
        return launcher.api_healthy(self.api_url)

    def alive(self) -> bool:
        """The recorded process still runs and is a Prefect server (a reused pid is not ours)."""
        return launcher.is_prefect_server(self.pid)


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def server_env(host: str, port: int, base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The server's environment: `base`, the defaults it does not set (these and the batched recording
    every kernelsweep server uses), and the UI's API address."""
    defaults = {**SERVER_DEFAULTS, **launcher.BATCHED_RECORDING_SETTINGS}
    return {**defaults, **base, "PREFECT_UI_API_URL": launcher.api_url(host, port)}


def _recorded(home: Path) -> LocalServer | None:
    try:
        server = LocalServer(**json.loads((home / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if server.alive():
        return server
    (home / STATE_FILE).unlink(missing_ok=True)  # it died without `stop`
    return None


def _tell(server: LocalServer) -> None:
    console.print(
        f"Prefect server at {server.ui_url} (pid {server.pid}, log {server.log}, database {server.database})",
        highlight=False,
        soft_wrap=True,
    )
    console.print("Point runs at it (in this shell, or your shell's profile):", highlight=False)
    out.print(f"export PREFECT_API_URL={server.api_url}", highlight=False, soft_wrap=True)


@click.group()
def server() -> None:
    """A local Prefect server in the background, so repeated runs skip Prefect's start-up."""


@server.command()
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="Port to serve the API and UI on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--database",
    metavar="URL",
    help="Keep the server's runs in this database, e.g. postgresql+asyncpg://USER:PASSWORD@HOST:5432/DB "
    f"[{DATABASE_ENV}, else SQLite in the Prefect home].",
)
@click.option(
    "--fleet",
    is_flag=True,
    help="A server for a fleet: without a --database URL, its runs go to a private PostgreSQL kernelsweep starts.",
)
def start(port: int, host: str, database: str | None, fleet: bool) -> None:
    """Start the server (or say where the running one is) and print the PREFECT_API_URL to export."""
    database = chosen_database(database)
    home = prefect_home()
    cluster = cluster_for(home) if fleet and not database else None
    running = _recorded(home)
    if running is not None and running.healthy():
        console.print("already running", highlight=False)
        _tell(running)
        return
    if running is not None:
        launcher.terminate_tree(running.pid)  # recorded but not answering: replace it
    if not launcher.port_free(host, port):
        raise UsageError(f"port {port} on {host} is in use; choose another with --port")
    log = home / LOG_FILE
    if cluster is not None:
        with console.status("starting the server's PostgreSQL"):
            database = cluster.start().url
    env = server_env(host, port, {**os.environ, **({DATABASE_ENV: database} if database else {})})
    process = launcher.launch(host, port, env, log)
    private = {"cluster": str(cluster.folder)} if cluster else {}
    started = LocalServer(pid=process.pid, host=host, port=port, log=str(log), **_database_field(database), **private)
    with console.status("starting the Prefect server (a fresh database takes a little longer)"):
        launcher.wait_healthy(process, started.api_url, log=log)
    (home / STATE_FILE).write_text(json.dumps(asdict(started)))
    _tell(started)


def chosen_database(option: str | None) -> str | None:
    """The database `--database` names, else the environment's, checked (SQLite in the home: None)."""
    if option:
        return checked_database_url(option, "--database")
    from_env = os.environ.get(DATABASE_ENV)
    return checked_database_url(from_env, DATABASE_ENV) if from_env else None


def _database_field(database: str | None) -> dict[str, str]:
    return {"database": shown(database)} if database else {}


@server.command()
def stop() -> None:
    """Stop the server `kernelsweep server start` started."""
    home = prefect_home()
    running = _recorded(home)
    if running is None:
        console.print("no server started by kernelsweep is running", highlight=False)
        return
    launcher.terminate_tree(running.pid)
    if running.cluster:
        Cluster(Path(running.cluster)).stop()
    (home / STATE_FILE).unlink(missing_ok=True)
    console.print(f"stopped the Prefect server (pid {running.pid})", highlight=False)


@server.command()
def status() -> None:
    """Whether the server runs, where, and whether this shell's PREFECT_API_URL points at it."""
    running = _recorded(prefect_home())
    if running is None:
        console.print("not running; `kernelsweep server start` starts it", highlight=False)
        sys.exit(1)
    state = "answering" if running.healthy() else "NOT answering"
    console.print(f"running (pid {running.pid}), {state} at {running.api_url}", highlight=False)
    if os.environ.get("PREFECT_API_URL") != running.api_url:
        console.print("this shell's PREFECT_API_URL does not point at it; runs here start their own", highlight=False)
        out.print(f"export PREFECT_API_URL={running.api_url}", highlight=False, soft_wrap=True)
