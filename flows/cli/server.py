"""`kernelsweep server start|stop|status`: one local Prefect server in the background for repeated runs.

Without PREFECT_API_URL, every `kernelsweep run` starts Prefect's ephemeral server first (about 10 s
here, nearer 20 s on a fresh Prefect home) and loses most of its task-run history at exit. With this
server running and its API URL exported, a run connects at once and its flow and task runs stay
browsable in the UI. The server runs `prefect server start` in its own session, logs to a file in the
Prefect home and is recorded there (pid, port), so `stop` and `status` find it from any shell. It
keeps a bounded database: finished flow runs older than a week are vacuumed (events are after a week by
default) unless the environment says otherwise (docs/fleet.md, "Database retention and server sizing").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.flows.cli.output import console, out

STATE_FILE, LOG_FILE = "kernelsweep-server.json", "kernelsweep-server.log"
DEFAULT_PORT = 4200
START_TIMEOUT_SECONDS = 180.0  # a fresh database migrates first; a loaded host is slower still
STOP_TIMEOUT_SECONDS = 30.0
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
    pid: int
    host: str
    port: int
    log: str

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}/api"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def healthy(self) -> bool:
        return api_healthy(self.api_url)

    def alive(self) -> bool:
        """The recorded process still runs and is a Prefect server (a reused pid is not ours)."""
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return b"prefect" in cmdline and b"server" in cmdline


def api_healthy(api_url: str) -> bool:
    """A Prefect API answers its health check (a server still starting, or gone, does not)."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def server_env(host: str, port: int, base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The server's environment: `base`, the defaults it does not set, and the UI's API address."""
    env = {**SERVER_DEFAULTS, **base, "PREFECT_UI_API_URL": f"http://{host}:{port}/api"}
    env.pop("PREFECT_API_URL", None)  # the server is the API; a client setting must not confuse it
    return env


def launch(host: str, port: int, env: Mapping[str, str], log: Path) -> subprocess.Popen:
    """`prefect server start` in its own session (a Ctrl-C in this shell does not reach it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as handle:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "prefect",
                "server",
                "start",
                "--host",
                host,
                "--port",
                str(port),
                "--analytics-off",
            ],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_healthy(server: LocalServer, process: subprocess.Popen, timeout: float = START_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not server.healthy():
        if process.poll() is not None:
            raise KernelsweepError(
                f"the Prefect server exited during start-up ({_last_line(server.log)}); see {server.log}"
            )
        if time.monotonic() > deadline:
            terminate(process.pid)
            raise KernelsweepError(f"the Prefect server did not answer within {timeout:.0f} s; see {server.log}")
        time.sleep(0.5)


def terminate(pid: int, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
    """SIGTERM to the server's session (the server and anything it started), SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _running(pid):
                return
            time.sleep(0.2)


def _running(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        return finished == 0
    except ChildProcessError:  # started by another shell's `kernelsweep server start`
        return Path(f"/proc/{pid}").exists() and _state_of(pid) != "Z"


def _state_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _last_line(log: str) -> str:
    try:
        lines = [line.strip() for line in Path(log).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"


def _recorded(home: Path) -> LocalServer | None:
    try:
        server = LocalServer(**json.loads((home / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if server.alive():
        return server
    (home / STATE_FILE).unlink(missing_ok=True)  # it died without `stop`
    return None


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _tell(server: LocalServer) -> None:
    console.print(
        f"Prefect server at {server.ui_url} (pid {server.pid}, log {server.log})", highlight=False, soft_wrap=True
    )
    console.print("Point runs at it (in this shell, or your shell's profile):", highlight=False)
    out.print(f"export PREFECT_API_URL={server.api_url}", highlight=False, soft_wrap=True)


@click.group()
def server() -> None:
    """A local Prefect server in the background, so repeated runs skip Prefect's start-up."""


@server.command()
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="Port to serve the API and UI on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
def start(port: int, host: str) -> None:
    """Start the server (or say where the running one is) and print the PREFECT_API_URL to export."""
    home = prefect_home()
    running = _recorded(home)
    if running is not None and running.healthy():
        console.print("already running", highlight=False)
        _tell(running)
        return
    if running is not None:
        terminate(running.pid)  # recorded but not answering: replace it
    if not _port_free(host, port):
        raise UsageError(f"port {port} on {host} is in use; choose another with --port")
    log = home / LOG_FILE
    process = launch(host, port, server_env(host, port), log)
    started = LocalServer(pid=process.pid, host=host, port=port, log=str(log))
    with console.status("starting the Prefect server (a fresh database takes a little longer)"):
        wait_healthy(started, process)
    (home / STATE_FILE).write_text(json.dumps(asdict(started)))
    _tell(started)


@server.command()
def stop() -> None:
    """Stop the server `kernelsweep server start` started."""
    home = prefect_home()
    running = _recorded(home)
    if running is None:
        console.print("no server started by kernelsweep is running", highlight=False)
        return
    terminate(running.pid)
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
