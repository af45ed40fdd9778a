"""The processes a benchmark measures from outside: a Prefect server (`prefect server start`, started
by kernelsweep's one launcher with `kernelsweep server`'s settings) on SQLite or on a throwaway
PostgreSQL, or Prefect's multi-server setup (two API processes on one address, the background
services in a process of their own, PostgreSQL, Redis), with their CPU read from /proc and their
database size read from the files or from PostgreSQL itself.

PostgreSQL is Debian's, the cluster `fleet demo` starts (kernelsweep.flows.postgres: the `postgres`
user's under root, a Unix socket in its own folder, no TCP port), in a fresh folder that is stopped
and deleted when the benchmark ends. Redis is Debian's `redis-server`, on 127.0.0.1 only,
keeping nothing on disk, with `prefect-redis` as Prefect's messaging (`pip install prefect-redis`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prefect.settings.models.server.services import (
    ServerServicesEventPersisterSettings,
    ServerServicesTaskRunRecorderSettings,
)

from kernelsweep.errors import UsageError
from kernelsweep.flows.cli.server import server_env
from kernelsweep.flows.postgres import SERVER_USER, Cluster
from kernelsweep.flows.server import (
    BATCHED_RECORDING_SETTINGS,
    LOOPBACK,
    NEUTRAL_FOLDER,
    api_url,
    free_port,
    launch_services,
    serving,
    terminate_tree,
)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
QUIET_CLIENT = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
REDIS_CONNECTIONS = 1000  # per server process; an API process needs one per host publishing at once


def _prefect_defaults() -> dict[str, str]:
    """Prefect's own defaults for the settings kernelsweep's servers batch, read from the installed
    Prefect's settings models (to measure a server as Prefect ships it)."""
    models = {
        "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_": ServerServicesTaskRunRecorderSettings,
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_": ServerServicesEventPersisterSettings,
    }
    defaults = {}
    for name in BATCHED_RECORDING_SETTINGS:
        prefix = next(p for p in models if name.startswith(p))
        defaults[name] = str(models[prefix].model_fields[name.removeprefix(prefix).lower()].default)
    return defaults


PREFECT_DEFAULT_RECORDING = _prefect_defaults()


def tree_cpu_seconds(root_pid: int) -> float:
    """CPU of a process and all its descendants, live and already reaped (their cutime/cstime)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(x) for x in fields[11:15]) / CLOCK_TICKS  # utime stime cutime cstime
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return total


def settle(cpu: Callable[[], float], *, idle_share: float = 0.03, window: float = 2.0, timeout: float = 180.0) -> None:
    """Wait until a server has worked off what it was sent: two quiet windows in a row."""
    deadline = time.monotonic() + timeout
    quiet, last = 0, cpu()
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(window)
        now = cpu()
        quiet = quiet + 1 if now - last < idle_share * window else 0
        last = now


@dataclass
class Postgres:
    cluster: Cluster

    @property
    def url(self) -> str:
        return self.cluster.url

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(int((self.cluster.data / "postmaster.pid").read_text().split()[0]))

    def database_bytes(self) -> int:
        return int(self.query("SELECT pg_database_size('prefect')")[0][0])

    def query(self, sql: str) -> list[list[str]]:
        return self.cluster.query(sql)


def require(program: str, package: str) -> None:
    """One clear line and exit 2 when a Debian package the benchmark starts is not installed."""
    if shutil.which(program) is None and not Path(program).is_file():
        print(f"{program} not found: install it with `apt-get install -y {package}`", file=sys.stderr)
        raise SystemExit(2)


@contextmanager
def postgres() -> Iterator[Postgres]:
    """A fresh cluster (kernelsweep.flows.postgres, as `fleet demo` starts one) in a folder of its own
    under the system temp folder, removed afterwards; a missing PostgreSQL is one line and exit 2."""
    try:
        folder = Path(tempfile.mkdtemp(prefix="kernelsweep-pg-"))
        if os.geteuid() == 0:
            shutil.chown(folder, SERVER_USER, SERVER_USER)
        cluster = Cluster(folder).start()
    except UsageError as exc:
        print(exc.message, file=sys.stderr)
        raise SystemExit(2) from None
    try:
        yield Postgres(cluster)
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Redis:
    port: int
    pid: int

    def messaging_env(self) -> dict[str, str]:
        """Prefect's Redis settings every process of a multi-server setup takes (docs/fleet.md):
        messaging (prefect-redis's broker with its round trips batched, `kernelsweep.flows.redis_broker`),
        lease storage and the background services' docket, all on this Redis. The URL
        raises a process's Redis connections from redis-py's default of 100: an API process takes one
        for each event websocket publishing at that moment, and past 100 it closes the others."""
        return {
            "PREFECT_MESSAGING_BROKER": "kernelsweep.flows.redis_broker",
            "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": "prefect_redis.lease_storage",
            "PREFECT_REDIS_MESSAGING_URL": f"redis://{LOOPBACK}:{self.port}/0?max_connections={REDIS_CONNECTIONS}",
            "PREFECT_SERVER_DOCKET_URL": f"redis://{LOOPBACK}:{self.port}/1",
        }

    def commands(self) -> int:
        """Commands Redis has served so far (INFO's `total_commands_processed`, this INFO among them)."""
        from redis import Redis as Client  # only a setup with Redis needs the client

        with contextlib.closing(Client(host=LOOPBACK, port=self.port)) as client:
            return int(client.info("stats")["total_commands_processed"])

    @staticmethod
    def api_env(api_processes: int) -> dict[str, str]:
        """What the API processes take besides: with several, the events' duplicate check on Redis (a
        client's event sent again after a reconnect can reach another one), and the causal ordering
        too, which `prefect server start --workers N` refuses to start without (Prefect 3.9.1) though
        only the triggers, in the services process, use it. One API process keeps both in memory."""
        if api_processes == 1:
            return {}
        return {
            "PREFECT_MESSAGING_CACHE": "prefect_redis.messaging",
            "PREFECT_SERVER_EVENTS_CAUSAL_ORDERING": "prefect_redis.ordering",
        }


@contextmanager
def redis() -> Iterator[Redis]:
    """Debian's redis-server on a free port of 127.0.0.1, in memory only, stopped when the `with` ends."""
    require("redis-server", "redis-server")
    base = Path(tempfile.mkdtemp(prefix="kernelsweep-redis-"))
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", LOOPBACK, "--save", "", "--appendonly", "no"]
    with (base / "redis.log").open("wb") as log:
        process = subprocess.Popen([*argv, "--dir", str(base)], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start: {(base / 'redis.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield Redis(port, process.pid)
    finally:
        terminate_tree(process)
        shutil.rmtree(base, ignore_errors=True)


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=2) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")
    return False


@dataclass
class Server:
    home: Path
    port: int
    pid: int
    database: Postgres | None  # None: SQLite in `home`
    others: dict[str, int] = field(default_factory=dict)  # more processes of the setup, by name: their pids
    broker: Redis | None = None  # the setup's Redis, if it has one

    @property
    def api_url(self) -> str:
        return api_url(LOOPBACK, self.port)

    def client_env(self) -> dict[str, str]:
        return {"PREFECT_API_URL": self.api_url, "PREFECT_HOME": str(self.home), **QUIET_CLIENT}

    def cpu_parts(self) -> dict[str, float]:
        """CPU seconds so far of each process of the setup (with their children): the API server,
        any others (background services, Redis), PostgreSQL when the database lives there."""
        parts = {"Prefect API": tree_cpu_seconds(self.pid)}
        parts |= {name: tree_cpu_seconds(pid) for name, pid in self.others.items()}
        if self.database:
            parts["PostgreSQL"] = self.database.cpu_seconds()
        return parts

    def cpu_seconds(self) -> float:
        return sum(self.cpu_parts().values())

    def redis_commands(self) -> int | None:
        """Commands the setup's Redis has served so far; None without one."""
        return self.broker.commands() if self.broker else None

    def task_runs(self) -> int:
        """Task runs the server has recorded so far."""
        if self.database:
            return int(self.database.query("SELECT count(*) FROM task_run")[0][0])
        with contextlib.closing(sqlite3.connect(self.home / "prefect.db", timeout=60)) as db:
            return int(db.execute("SELECT count(*) FROM task_run").fetchone()[0])

    def database_bytes(self) -> int:
        """PostgreSQL's own size of the database; SQLite's pages in use (the WAL's included, the free
        list not), which unlike the files' sizes does not jump with each WAL checkpoint."""
        if self.database:
            return self.database.database_bytes()
        with contextlib.closing(sqlite3.connect(self.home / "prefect.db", timeout=60)) as db:
            pages, free, size = (
                db.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_count", "freelist_count", "page_size")
            )
        return (pages - free) * size


def _server_base(home: Path, database: Postgres | None, settings: dict[str, str] | None) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    base |= {"PREFECT_HOME": str(home), **QUIET_CLIENT, **(settings or {})}
    if database:
        base["PREFECT_API_DATABASE_CONNECTION_URL"] = database.url
    return base


@contextmanager
def prefect_server(
    home: Path, database: Postgres | None = None, settings: dict[str, str] | None = None
) -> Iterator[Server]:
    """`prefect server start` with its own home (and SQLite there, unless `database` is given), and
    any server `settings` (PREFECT_SERVER_... variables) on top of `kernelsweep server`'s."""
    port = free_port()
    with serving(
        port, server_env(LOOPBACK, port, _server_base(home, database, settings)), home / "server.log"
    ) as process:
        yield Server(home, port, process.pid, database)


@contextmanager
def multi_server(
    home: Path, database: Postgres, broker: Redis, api_processes: int = 2, settings: dict[str, str] | None = None
) -> Iterator[Server]:
    """Prefect's documented multi-server setup, with `kernelsweep server`'s settings: the database
    migrated once beforehand, `api_processes` API processes on one address (`prefect server start
    --workers N --no-services`), and `prefect server services start` in a process of its own."""
    port = free_port()
    # Two API processes registering Prefect's block types on a fresh database at once collide on a
    # unique key and stop the server (seen with Prefect 3.9.1); no sweep uses a block.
    quiet_start = {"PREFECT_API_DATABASE_MIGRATE_ON_START": "false", "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false"}
    base = _server_base(home, database, {**broker.messaging_env(), **quiet_start, **(settings or {})})
    env = server_env(LOOPBACK, port, base)
    migrate = [sys.executable, "-P", "-m", "prefect", "server", "database", "upgrade", "-y"]
    subprocess.run(migrate, env=env, cwd=NEUTRAL_FOLDER, capture_output=True, check=True, timeout=600)
    services = launch_services(env, home / "services.log")  # the one services process: SERVICES_PROCESS_SETTINGS
    api = {**env, **broker.api_env(api_processes), **(settings or {})}
    try:
        with serving(port, api, home / "server.log", ui=False, workers=api_processes, services=False) as process:
            others = {"background services": services.pid, "Redis": broker.pid}
            yield Server(home, port, process.pid, database, others, broker)
    finally:
        terminate_tree(services)
