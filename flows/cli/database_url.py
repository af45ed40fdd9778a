"""The database a `kernelsweep server start --database URL` server keeps its runs in, checked before it starts.

Prefect's server speaks two databases: SQLite (its default, a file in the Prefect home) and PostgreSQL
through asyncpg. SQLite serialises every write behind one lock, and with a handful of workers and
their flow runs writing at once it answers `database is locked` (docs/fleet.md has the measurement),
so a fleet's server runs on PostgreSQL. A URL Prefect cannot use is refused here with one line, before
a server is started that would fail a minute later with a traceback in its log; so is a PostgreSQL
that does not answer on its address at all. The URL is parsed by SQLAlchemy, the library Prefect
hands it to.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import unquote

from kernelsweep.errors import UsageError

POSTGRES_DRIVER = "postgresql+asyncpg"
SQLITE_DRIVER = "sqlite+aiosqlite"
EXAMPLE = "postgresql+asyncpg://USER:PASSWORD@HOST:5432/DATABASE"
POSTGRES_PORT = 5432
CONNECT_SECONDS = 5.0


def checked_database_url(url: str, where: str = "--database") -> str:
    """`url` when Prefect's server can keep its database there; else a UsageError naming `where` it came
    from and the fix."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"{where} {_hidden(url)}: not a database URL; give {EXAMPLE}") from None
    if parsed.drivername == SQLITE_DRIVER:
        return url
    if parsed.drivername != POSTGRES_DRIVER:
        raise UsageError(
            f"{where}: the server cannot use {parsed.drivername}; give {EXAMPLE} "
            f"(PostgreSQL through asyncpg), or {SQLITE_DRIVER}:///PATH"
        )
    socket_folder = parsed.query.get("host")  # ?host=/folder: a Unix socket (kernelsweep.flows.postgres)
    if not (parsed.host or socket_folder) or not parsed.database:
        raise UsageError(f"{where} {shown(url)}: name the host and the database, as in {EXAMPLE}")
    if isinstance(socket_folder, str) and socket_folder.startswith("/"):
        socket_file = Path(socket_folder) / f".s.PGSQL.{parsed.port or POSTGRES_PORT}"
        if not socket_file.exists():
            raise UsageError(f"{where} {shown(url)}: no PostgreSQL at {socket_file}; start PostgreSQL or fix the URL")
        return url
    _reachable(parsed.host or "", parsed.port or POSTGRES_PORT, f"{where} {shown(url)}")
    return url


def _reachable(host: str, port: int, named: str) -> None:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_SECONDS):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(
            f"{named}: nothing answers at {host}:{port} ({reason}); start PostgreSQL or fix the URL"
        ) from None


def shown(url: str) -> str:
    """The URL as it may be printed and recorded: its password hidden."""
    from sqlalchemy.engine import make_url

    return unquote(make_url(url).render_as_string(hide_password=True))  # a socket folder as written: host=/...


def _hidden(url: str) -> str:
    """An unparseable URL may still hold a password: show only its scheme."""
    scheme, sep, _ = url.partition("://")
    return f"{scheme}://..." if sep else "(unparseable)"
