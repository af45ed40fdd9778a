"""`kernelsweep server start --database URL`: a server on PostgreSQL, and one line for a URL it cannot use.

The slow test starts the command against a throwaway PostgreSQL (Debian's postgresql 15, the cluster
benchmarks/servers.py makes) and checks the flow run a client creates lands in PostgreSQL, not in a
SQLite file of the Prefect home. docs/fleet.md's "When SQLite stops being enough" has the measurement
(benchmarks/server_db.py) that says when a fleet needs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prefect_server import bench_servers, free_port

from kernelsweep.errors import UsageError
from kernelsweep.flows.cli.database_url import checked_database_url
from kernelsweep.flows.cli.server import STATE_FILE


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("not a url", "not a database URL; give postgresql+asyncpg://"),
        ("mysql://u:pw@db/prefect", "the server cannot use mysql; give postgresql+asyncpg://"),
        ("postgresql://u:pw@db/prefect", "the server cannot use postgresql; give postgresql+asyncpg://"),
        ("postgresql+asyncpg://u:pw@/prefect", "name the host and the database"),
        ("postgresql+asyncpg://u:pw@127.0.0.1:{port}/prefect", "nothing answers at 127.0.0.1:{port}"),
    ],
)
def test_a_database_the_server_cannot_use_is_refused_with_the_fix(url, says):
    port = free_port()
    with pytest.raises(UsageError) as refused:
        checked_database_url(url.format(port=port))
    assert says.format(port=port) in refused.value.message
    assert "pw" not in refused.value.message  # a password is never echoed


def test_an_sqlite_url_is_accepted_as_given():
    assert checked_database_url("sqlite+aiosqlite:///tmp/prefect.db") == "sqlite+aiosqlite:///tmp/prefect.db"


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelsweep.flows.cli", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)  # fmt: skip


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_"))}
    return {**env, "PREFECT_HOME": str(home)}


@pytest.mark.slow
def test_server_start_on_postgresql_keeps_the_runs_there_and_a_bad_url_exits_2(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    bad = _cli("server", "start", "--database", "mysql://u:secret@db/prefect", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "postgresql+asyncpg://" in bad.stderr and "secret" not in bad.stderr
    assert not (home / STATE_FILE).exists()  # nothing started, nothing recorded

    with bench_servers().postgres() as pg:
        port = free_port()
        started = _cli("server", "start", "--port", str(port), "--database", pg.url, env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        try:
            assert f"database {pg.url}" in started.stderr  # no password in this URL to hide
            api = f"http://127.0.0.1:{port}/api"
            flow = _post(f"{api}/flows/", {"name": "on-postgresql"})
            run = _post(f"{api}/flow_runs/", {"flow_id": flow["id"], "name": "kept-in-postgresql"})
            assert pg.query(f"SELECT name FROM flow_run WHERE id = '{run['id']}'") == [["kept-in-postgresql"]]
            assert not (home / "prefect.db").exists()  # no SQLite beside it
            status = _cli("server", "status", env={**env, "PREFECT_API_URL": api}, cwd=tmp_path)
            assert status.returncode == 0 and "answering" in status.stderr, status.stderr
        finally:
            stopped = _cli("server", "stop", env=env, cwd=tmp_path)
            assert stopped.returncode == 0, stopped.stderr


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())
