"""`kernelsweep fleet worker`: this host's Prefect worker, `prefect worker start`, that SIGTERM stops.

Prefect's worker answers SIGTERM by sending itself SIGINT and stopping on that (Prefect 3.9). A
process started with SIGINT ignored, as a shell starts a background job (`cmd &` in a script, `nohup`)
and as some supervisors start their services, inherits the ignore across exec: the worker's SIGINT
then does nothing, and an idle worker logs "Received SIGTERM. Sending SIGINT ..." and runs on until a
second signal kills it (docs/reliability.md; systemd's stop waited its TimeoutStopSec, 120 s, on every
stop). This command puts SIGINT and SIGTERM back to their defaults and then becomes `prefect worker
start` (exec: the same process id, which is what a supervisor signals), so SIGTERM stops it at once
when it is idle, and stops it (and with it, under the shipped unit, its flow runs) when it is not.

Its flow runs beat every 30 s (PREFECT_FLOWS_HEARTBEAT_FREQUENCY, unless set), so a host that dies
is noticed within `fleet up --crash-after` (default 120 s). The fleet's pools start each flow run as
`python -m kernelsweep.flows.fleet.engine` (kernelsweep.flows.fleet.setup), which asks this host's
prefork server, started here, for a forked engine: this interpreter is put first on the worker's PATH
as `python`, so that is the one they run, whatever else the host's PATH holds.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from kernelsweep.flows.fleet.engine import SOCKET_ENV
from kernelsweep.flows.fleet.prefork import flow_module

PREFECT_WORKER = ("-P", "-m", "prefect", "worker", "start")  # -P: the working folder off the import path
# How often this host's flow runs tell the server they live, unless the environment says: Prefect's
# least, so `fleet up --crash-after` (120 s by default) can mark a dead host's shard Crashed in two minutes.
HEARTBEAT_ENV, HEARTBEAT_SECONDS = "PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "30"
COMPILE_LIMIT = 1  # compile shards at once on a compile host, unless --limit says
# kernelsweep.fleet.farm's COMPILE_POOL, written out: importing the fleet's plan would cost every host's
# worker start (a test holds the two equal)
COMPILE_POOL = "kernelsweep-compile"


def worker_argv(pool: str, name: str | None, limit: int | None, extra: tuple[str, ...] = ()) -> list[str]:
    """`prefect worker start` for one pool, as this interpreter runs it. A compile host takes one shard
    at a time unless told otherwise: its `compile_slots` already fill its CPUs, and without a limit one
    host took every compile shard of a night in seconds while the farm's other hosts stood idle."""
    if limit is None and pool == COMPILE_POOL:
        limit = COMPILE_LIMIT
    argv = [sys.executable, *PREFECT_WORKER, "--pool", pool]
    argv += ["--name", name] if name else []
    argv += ["--limit", str(limit)] if limit is not None else []
    return [*argv, *extra]


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--pool", required=True, help="This host's work pool, e.g. kernelsweep-trn2.")
@click.option("--name", help="The worker's name [Prefect's: a generated one]; a fleet uses the host name.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help=f"Flow runs at once on this host [{COMPILE_LIMIT} in {COMPILE_POOL}, else no limit].",
)
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def worker(pool: str, name: str | None, limit: int | None, extra: tuple[str, ...]) -> None:
    """Run this host's Prefect worker (`prefect worker start`; further options go to it) so that SIGTERM stops it."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    argv = worker_argv(pool, name, limit, extra)
    path = os.pathsep.join([python_folder(), os.environ.get("PATH", os.defpath)])
    sys.stdout.flush()
    sys.stderr.flush()
    beats = {HEARTBEAT_ENV: os.environ.get(HEARTBEAT_ENV) or HEARTBEAT_SECONDS}
    env = {**os.environ, "PATH": path, **beats}
    env[SOCKET_ENV] = start_prefork_server(env, pool)
    os.execve(argv[0], argv, env)


def start_prefork_server(env: dict[str, str], pool: str) -> str:
    """This host's prefork server (kernelsweep.flows.fleet.prefork), a child of this process and so of
    the worker it becomes: the address its flow runs' command asks for a process at. Abstract and
    random, as the simulated tools' template's: a host killed outright leaves no socket file behind."""
    address = f"@kernelsweep-prefork-{os.getpid()}-{secrets.token_hex(8)}"
    server = [sys.executable, "-P", "-m", "kernelsweep.flows.fleet.prefork", address, flow_module(pool)]
    subprocess.Popen(server, env=env, stdin=subprocess.DEVNULL)
    return address


def python_folder() -> str:
    """A folder whose `python` is this interpreter: its own (a venv's bin, where kernelsweep is installed),
    else a private one holding a `python` that execs it (a system install may have only `python3`)."""
    own = Path(sys.executable).parent
    if (own / "python").is_file() and (own / "python").resolve() == Path(sys.executable).resolve():
        return str(own)
    # One folder per interpreter, written again at each start (a worker restarted nightly leaves no trail).
    tag = hashlib.sha256(sys.executable.encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"kernelsweep-worker-python-{os.getuid()}-{tag}"
    folder.mkdir(mode=0o700, exist_ok=True)
    script = folder / "python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return str(folder)
