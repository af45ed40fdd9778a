"""`kernelsweep fleet demo`: the whole fleet on this machine, in one command, for trying it out.

It starts a Prefect server (through kernelsweep.flows.server, like every server here) with its own
Prefect home, sets the fleet up on it exactly as `kernelsweep fleet up` does (with a small simulated
nightly spec written for the demo), and starts a control worker and simulated hosts of every family
(two trn2, one trn1, one inf2), each a `kernelsweep fleet worker` with its own private state: its
NeuronCore leases and simulated device (mode 700, as a real host's are). A small web server serves
the results' folder, so the report's and the results site's links in the UI open in a browser. It prints the UI's
address and waits; Ctrl-C (or `kernelsweep fleet demo --stop` from another shell) stops every
process it started and keeps the demo's folder (results, reports, logs) for a look afterwards.

The server keeps its runs in PostgreSQL: the one `--database` (or PREFECT_API_DATABASE_CONNECTION_URL)
names, else a private cluster of the demo's own that kernelsweep starts (kernelsweep.flows.postgres)
and stops with the demo, keeping its runs for the next start. Under the demo's five workers SQLite
answered "database is locked" at times, which Prefect's clients retry but the UI's run form does not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.fleet import pool_name
from kernelsweep.flows import server as launcher
from kernelsweep.flows.cli.database_url import shown
from kernelsweep.flows.cli.output import console, out
from kernelsweep.flows.cli.server import DATABASE_ENV, chosen_database, server_env
from kernelsweep.flows.postgres import Cluster, cluster_for
from kernelsweep.flows.settings import REPORTS_URL_ENV, SITE_URL_ENV, state_folder
from kernelsweep.locks import private_folder
from kernelsweep.sim.config import sim_env

HOSTS = {"trn1-a": "trn1", "trn2-a": "trn2", "trn2-b": "trn2", "inf2-a": "inf2"}  # name -> family
STATE_FILE = "demo.json"
STOP_SECONDS = 10.0
DEMO_CRASH_AFTER = 60  # `fleet up --crash-after`'s least: two of its hosts' 30 s heartbeats
SPEC = """\
# The demo fleet's nightly suite: every family, on the simulated toolchain, results in this folder.
name = "demo"
platforms = ["trn1", "trn2", "inf2"]
toolchain = "sim"
results = "{home}/results"
artifacts = "{home}/artifacts"

[capture]
num_exec = 2

[execution]
max_points_per_flow_run = 3
worker_wait_seconds = 300

[[kernels]]
kernel = "vector_add"
dtypes = ["float32"]
grid = {{ n = [2048, 8192], free_size = [1, 4, 16] }}

[fleet]
cron = "0 2 * * *"
timezone = "UTC"
"""


@click.command()
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), help="The demo's folder [<state>/demo].")
@click.option("--port", type=int, default=4300, show_default=True, help="The Prefect server's port (UI and API).")
@click.option("--time-scale", type=float, default=0.2, show_default=True, help="Simulated tool latencies x this.")
@click.option("--file", "file_path", default="deployments/prefect.yaml", show_default=True, help="The prefect.yaml.")
@click.option(
    "--database",
    metavar="URL",
    help=f"Keep the demo server's runs in this PostgreSQL, postgresql+asyncpg://... [{DATABASE_ENV}, else a "
    "private PostgreSQL the demo starts].",
)
@click.option("--stop", "stop_it", is_flag=True, help="Stop the demo running from another shell.")
def demo(home: Path | None, port: int, time_scale: float, file_path: str, database: str | None, stop_it: bool) -> None:
    """A local fleet: a Prefect server, the fleet's pools and deployments, simulated hosts of every family."""
    home = (home or state_folder() / "demo").expanduser().absolute()
    if stop_it:
        _stop_recorded(home)
        return
    database = chosen_database(database)  # a bad URL is refused before anything starts
    if not Path(file_path).is_file():
        raise UsageError(f"{file_path}: no such file; run from the repository's root folder or pass --file")
    private_folder(home, "demo folder")
    recorded = _recorded(home)
    if recorded is not None:
        raise UsageError(f"a demo runs from {home} (pid {recorded}); stop it: `kernelsweep fleet demo --stop`")
    for wanted in (port, port + 1):
        if not launcher.port_free(launcher.LOOPBACK, wanted):
            raise UsageError(f"port {wanted} is in use; choose another with --port (the demo takes it and the next)")
    cluster = None if database else cluster_for(home)  # PostgreSQL missing: one line, before anything starts
    _run(home, port, time_scale, Path(file_path).resolve(), database, cluster)


def _run(
    home: Path, port: int, time_scale: float, prefect_yaml: Path, database: str | None, cluster: Cluster | None
) -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    (home / "logs").mkdir(exist_ok=True)
    processes: list[subprocess.Popen[bytes]] = []
    reports = _serve_reports(home / "results", port + 1)
    env = _client_env(home, port)
    try:
        if cluster is not None:
            with console.status("starting the demo's PostgreSQL"):
                database = cluster.start().url
        served = server_env(launcher.LOOPBACK, port, {**env, DATABASE_ENV: str(database)})
        processes.append(launcher.launch(launcher.LOOPBACK, port, served, home / "logs" / "server.log", cwd=home))
        with console.status("starting the Prefect server and setting the fleet up (about a minute)"):
            launcher.wait_healthy(processes[0], env["PREFECT_API_URL"], log=home / "logs" / "server.log")
            _fleet_up(env, home, prefect_yaml)
        control = {**env, REPORTS_URL_ENV: _reports_url(port), SITE_URL_ENV: _reports_url(port, "site")}
        processes.append(_worker(home, "control", pool_name("control"), control))
        for name, family in HOSTS.items():
            host = {**env, **_host_env(home, name, family, time_scale)}
            processes.append(_worker(home, name, pool_name(family), host))
        (home / STATE_FILE).write_text(json.dumps({"pid": os.getpid(), "port": port}))
        _tell(home, port, shown(str(database)))
        while not stop.wait(1.0):
            if processes[0].poll() is not None:
                raise KernelsweepError(f"the demo's Prefect server stopped; see {home / 'logs' / 'server.log'}")
    finally:
        for process in reversed(processes):
            launcher.terminate_tree(process, grace_seconds=STOP_SECONDS)
        if cluster is not None:
            cluster.stop()
        reports.shutdown()
        reports.server_close()
        (home / STATE_FILE).unlink(missing_ok=True)
    console.print(f"stopped the demo; its results, reports and logs stay in {home}", highlight=False)


def _tell(home: Path, port: int, database: str) -> None:
    url = f"http://{launcher.LOOPBACK}:{port}"
    out.print(f"Prefect UI: {url}  (run fleet/fleet from Deployments, Run > Custom run)", highlight=False)
    console.print(
        f"hosts: {', '.join(f'{n} ({f})' for n, f in HOSTS.items())} and a control worker; reports at "
        f"{_reports_url(port)}, the results site at {_reports_url(port, 'site')}index.html; logs in "
        f"{home / 'logs'}; runs kept in {database}",
        highlight=False,
        soft_wrap=True,
    )
    out.print(f"export PREFECT_API_URL={launcher.api_url(launcher.LOOPBACK, port)}", highlight=False)
    console.print("stop with Ctrl-C, or `kernelsweep fleet demo --stop` from another shell", highlight=False)


def _client_env(home: Path, port: int) -> dict[str, str]:
    """What every process of the demo runs with: this server, quiet, Prefect's timers short."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_"))}
    return {
        **env,
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_API_URL": launcher.api_url(launcher.LOOPBACK, port),
        "PREFECT_UI_URL": f"http://{launcher.LOOPBACK}:{port}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "3",
    }


def _host_env(home: Path, name: str, family: str, time_scale: float) -> dict[str, str]:
    """A simulated host of `family`: its own private lease and device-state folders."""
    root = private_folder(home / "hosts" / name, "simulated host folder")
    state = private_folder(root / "sim", "simulator state folder")
    return {
        **sim_env(platform=family, host=name, state_dir=state, time_scale=float(time_scale)),
        "KERNELSWEEP_LOCK_DIR": str(private_folder(root / "locks", "lock folder")),
    }


def _fleet_up(env: dict[str, str], home: Path, prefect_yaml: Path) -> None:
    spec = home / "nightly.toml"
    spec.write_text(SPEC.format(home=home))
    argv = [sys.executable, "-m", "kernelsweep.flows.cli", "fleet", "up", "--file", str(prefect_yaml)]
    argv += ["--crash-after", str(DEMO_CRASH_AFTER)]  # a killed demo host's shard is retried within a minute or two
    with (home / "logs" / "fleet-up.log").open("wb") as log:
        done = subprocess.run([*argv, "--spec", str(spec)], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=home)
    if done.returncode != 0:
        raise KernelsweepError(f"`kernelsweep fleet up` failed; see {home / 'logs' / 'fleet-up.log'}")


def _worker(home: Path, name: str, pool: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "kernelsweep.flows.cli", "fleet", "worker", "--pool", pool, "--name", name]
    argv += ["--limit", "4" if name == "control" else "1"]  # as the shipped unit runs it: SIGTERM stops it
    with (home / "logs" / f"worker-{name}.log").open("ab") as log:
        return subprocess.Popen(
            argv, env=env, cwd=home, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )


def _reports_url(port: int, folder: str = "reports") -> str:
    """The demo's web server's URL of a folder of the results (reports/, site/)."""
    return f"http://{launcher.LOOPBACK}:{port + 1}/{folder}/"


def _serve_reports(folder: Path, port: int) -> ThreadingHTTPServer:
    """The results folder (its reports/ and site/) over http, quietly, in a thread of this process."""
    folder.mkdir(parents=True, exist_ok=True)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
            pass

    httpd = ThreadingHTTPServer((launcher.LOOPBACK, port), partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, name="demo-reports", daemon=True).start()
    return httpd


def _recorded(home: Path) -> int | None:
    """The pid of a demo running from `home`, if one is."""
    try:
        pid = int(json.loads((home / STATE_FILE).read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if b"demo" in cmdline else None


def _stop_recorded(home: Path) -> None:
    pid = _recorded(home)
    if pid is None:
        console.print(f"no demo runs from {home}", highlight=False)
        return
    os.kill(pid, signal.SIGTERM)  # the demo stops its own processes
    for _ in range(int(4 * launcher.STOP_GRACE_SECONDS)):
        if _recorded(home) is None:
            console.print(f"stopped the demo (pid {pid})", highlight=False)
            return
        threading.Event().wait(0.5)
    raise KernelsweepError(f"the demo (pid {pid}) did not stop; stop it with `kill {pid}`")
