"""The processes a benchmark measures from outside: a Prefect server (`prefect server start`, started
by kernelsweep's one launcher with `kernelsweep server`'s settings) on SQLite or on a throwaway
PostgreSQL, with their CPU read from /proc and their database size read from the files or from
PostgreSQL itself.

PostgreSQL is Debian's (`postgresql` 15): initdb refuses root, so the cluster belongs to the
`postgres` user and listens on 127.0.0.1 only, with trust authentication for that address; it is
stopped and deleted when the benchmark ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.flows.cli.server import server_env
from kernelsweep.flows.server import LOOPBACK, api_url, free_port, serving

PG_BIN = Path("/usr/lib/postgresql/15/bin")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
QUIET_CLIENT = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


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
    data_dir: Path
    port: int
    postmaster_pid: int

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/prefect"

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.postmaster_pid)

    def database_bytes(self) -> int:
        sql = "SELECT pg_database_size('prefect')"
        answer = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "prefect", "-tAc", sql],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        return int(answer.stdout.strip())


def _run(argv: list[str], timeout: float = 300) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {(done.stdout + done.stderr).strip()}")


@contextmanager
def postgres() -> Iterator[Postgres]:
    """A fresh cluster with one `prefect` database, owned by the `postgres` user (initdb refuses root)
    in a folder of its own under the system temp folder, on a free port of 127.0.0.1."""
    base = Path(tempfile.mkdtemp(prefix="kernelsweep-pg-"))
    shutil.chown(base, "postgres")
    data = base / "data"
    as_postgres = ["runuser", "-u", "postgres", "--"]
    _run([*as_postgres, str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"])
    port = free_port()
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1"
    _run(
        [
            *as_postgres,
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(base / "pg.log"),
            "-w",
            "start",
        ]
    )
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        _run(["createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "prefect"], timeout=60)
        yield Postgres(data, port, pid)
    finally:
        subprocess.run([*as_postgres, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True, timeout=300)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Server:
    home: Path
    port: int
    pid: int
    database: Postgres | None  # None: SQLite in `home`

    @property
    def api_url(self) -> str:
        return api_url(LOOPBACK, self.port)

    def client_env(self) -> dict[str, str]:
        return {"PREFECT_API_URL": self.api_url, "PREFECT_HOME": str(self.home), **QUIET_CLIENT}

    def cpu_seconds(self) -> float:
        """The API server's CPU, plus PostgreSQL's when the database lives there."""
        return tree_cpu_seconds(self.pid) + (self.database.cpu_seconds() if self.database else 0.0)

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


@contextmanager
def prefect_server(
    home: Path, database: Postgres | None = None, settings: dict[str, str] | None = None
) -> Iterator[Server]:
    """`prefect server start` with its own home (and SQLite there, unless `database` is given), and
    any server `settings` (PREFECT_SERVER_... variables) on top of `kernelsweep server`'s."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    base |= {"PREFECT_HOME": str(home), **QUIET_CLIENT, **(settings or {})}
    if database:
        base["PREFECT_API_DATABASE_CONNECTION_URL"] = database.url
    with serving(port, server_env(LOOPBACK, port, base), home / "server.log") as process:
        yield Server(home, port, process.pid, database)
