"""A private PostgreSQL cluster for a fleet's Prefect server, started by kernelsweep when no URL is given.

A fleet's workers, shards and UI write to one server at once, and SQLite then answers "database is
locked": Prefect's clients retry, its UI's run form does not (docs/fleet.md). Prefect's self-hosting
guide puts anything past one process on PostgreSQL, so `fleet demo` and `server start --fleet` start
Debian's (`apt-get install postgresql`) themselves, as the test suite does:

- initialised once in a folder of its own, then reused: stopping the server keeps the runs;
- reachable only through a Unix socket in that folder (mode 700): no TCP port to pick, collide on
  or expose, and the `trust` login reaches nobody else;
- run as the caller, or as Debian's `postgres` user when the caller is root (PostgreSQL refuses to
  run as root): then the folder lives under the system's temporary folder, where that user can
  reach it, named after the caller's folder so the same home finds the same cluster (as it does
  when the caller's folder is too deep for a socket's path).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import UsageError

DATABASE = "prefect"
SERVER_USER = "postgres"  # Debian's package makes it; the server's processes run as it under root
INSTALL = "install PostgreSQL (`apt-get install -y postgresql`) or pass --database URL"
DEBIAN_BINARIES = Path("/usr/lib/postgresql")
COMMAND_SECONDS = 120.0
SOCKET_PATH_ROOM = 80  # a Unix socket's path is at most 107 bytes: the folder, /postgres/.s.PGSQL.5432


@dataclass(frozen=True)
class Cluster:
    folder: Path  # data/, the socket and the log

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "postgresql.log"

    @property
    def url(self) -> str:
        """The asyncpg URL Prefect's server keeps its database at: the socket folder as `host`."""
        return f"postgresql+asyncpg://{SERVER_USER}@/{DATABASE}?host={self.folder}"

    def running(self) -> bool:
        return _pg_ctl(self, "status", check=False).returncode == 0

    def start(self) -> Cluster:
        """Initialise the cluster if it is new, start it unless it runs, and make Prefect's database."""
        if not (self.data / "PG_VERSION").is_file():
            _as_server_user([str(_binary("initdb")), "-D", str(self.data), "-A", "trust", "-U", SERVER_USER])
        if not self.running():
            (self.data / "postmaster.pid").unlink(missing_ok=True)  # a cluster killed with its machine
            options = f"-k {self.folder} -c listen_addresses='' -c unix_socket_permissions=0700"
            _pg_ctl(self, "start", "-o", options, "-l", str(self.log))
        present = _as_server_user(
            [
                str(_binary("psql")),
                "-h",
                str(self.folder),
                "-U",
                SERVER_USER,
                "-d",
                "postgres",
                "-tAc",
                f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'",
            ],
        )  # fmt: skip: the server's own database, as Prefect's may not exist yet
        if present.stdout.strip() != "1":
            _as_server_user([str(_binary("createdb")), "-h", str(self.folder), "-U", SERVER_USER, DATABASE])
        return self

    def query(self, sql: str) -> list[list[str]]:
        """The rows of one SQL statement on Prefect's database, each a list of its fields as text (for
        the checks and measurements that read what the server wrote)."""
        argv = [str(_binary("psql")), "-h", str(self.folder), "-U", SERVER_USER, "-d", DATABASE, "-tA", "-F", "\t"]
        done = _as_server_user([*argv, "-c", sql])
        return [line.split("\t") for line in done.stdout.splitlines() if line]

    def stop(self) -> None:
        if self.running():
            _pg_ctl(self, "stop", "-m", "fast")


def cluster_for(home: Path) -> Cluster:
    """The cluster that belongs to `home` (a Prefect home, a demo's folder), made if need be; a
    UsageError with the fix when PostgreSQL is not installed, before anything starts."""
    for program in ("initdb", "pg_ctl", "psql", "createdb"):
        _binary(program)
    if os.geteuid() != 0 and len(str(home.absolute())) <= SOCKET_PATH_ROOM:
        folder = home.absolute() / "postgres"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return Cluster(folder)
    if os.geteuid() == 0 and (shutil.which("runuser") is None or not _user_exists(SERVER_USER)):
        raise UsageError(f"PostgreSQL cannot run as root and there is no `{SERVER_USER}` user to run it as; {INSTALL}")
    digest = hashlib.sha256(str(home.absolute()).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"kernelsweep-postgres-{digest}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(folder, SERVER_USER, SERVER_USER)
    return Cluster(folder)


def _binary(name: str) -> Path:
    """Debian's newest installed major version's program, else the one on PATH; else one line with the fix."""
    versions = sorted(
        (p for p in DEBIAN_BINARIES.glob(f"*/bin/{name}") if p.parent.parent.name.isdigit()),
        key=lambda p: int(p.parent.parent.name),
    )
    found = versions[-1] if versions else shutil.which(name)
    if found is None:
        raise UsageError(f"PostgreSQL's {name} is not installed; {INSTALL}")
    return Path(found)


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _pg_ctl(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _as_server_user([str(_binary("pg_ctl")), "-D", str(cluster.data), "-w", *args], check=check)


def _as_server_user(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL program as the caller, or as the server's user under root."""
    program = Path(argv[0]).name
    if os.geteuid() == 0:
        argv = ["runuser", "-u", SERVER_USER, "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_SECONDS, cwd="/")
    if check and done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[-400:]
        raise UsageError(f"PostgreSQL's {program} failed: {said}")
    return done
