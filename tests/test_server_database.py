"""`kernelsweep server start --fleet | --database URL`: a server on PostgreSQL, and one line for a URL it
cannot use or a PostgreSQL that is not installed.

The slow test starts the command on the private PostgreSQL `--fleet` starts (Debian's postgresql 15,
kernelsweep.flows.postgres), then with that cluster's URL given, and checks the flow run a client
creates is kept there, not in a SQLite file of the Prefect home. docs/fleet.md's "When SQLite stops
being enough" has the measurement (benchmarks/server_db.py) that says when a fleet needs it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prefect_server import free_port

from kernelsweep.errors import UsageError
from kernelsweep.flows import postgres
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


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def test_a_socket_url_is_accepted_when_postgresql_listens_there_and_refused_naming_the_socket(tmp_path):
    url = f"postgresql+asyncpg://postgres@/prefect?host={tmp_path}"
    with pytest.raises(UsageError) as refused:
        checked_database_url(url)
    assert f"no PostgreSQL at {tmp_path}/.s.PGSQL.5432" in refused.value.message
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(tmp_path / ".s.PGSQL.5432"))
        listening.listen()
        assert checked_database_url(url) == url


def test_a_fleet_server_without_postgresql_installed_is_one_line_with_the_install(tmp_path, monkeypatch):
    monkeypatch.setattr(postgres, "DEBIAN_BINARIES", tmp_path / "none")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UsageError) as refused:
        postgres.cluster_for(tmp_path / "home")
    assert "apt-get install -y postgresql" in refused.value.message and "--database URL" in refused.value.message
    assert not (tmp_path / "home").exists()  # nothing made


@pytest.mark.slow
def test_a_fleet_server_keeps_its_runs_in_postgresql_its_own_or_the_one_named_and_a_bad_url_exits_2(tmp_path):
    """`--fleet` starts a private PostgreSQL that `stop` stops; `--database URL` uses the one named (here
    that same cluster, started by hand) and leaves it running; a run made on the first is read on the second."""
    home = tmp_path / "home"
    home.mkdir()
    env, cluster = _env(home), postgres.cluster_for(home)
    bad = _cli("server", "start", "--database", "mysql://u:secret@db/prefect", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "postgresql+asyncpg://" in bad.stderr and "secret" not in bad.stderr
    assert not (home / STATE_FILE).exists()  # nothing started, nothing recorded
    try:
        port = free_port()
        started = _cli("server", "start", "--fleet", "--port", str(port), env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        assert f"database {cluster.url}" in started.stderr and cluster.running()
        api = f"http://127.0.0.1:{port}/api"
        flow = _post(f"{api}/flows/", {"name": "on-postgresql"})
        run = _post(f"{api}/flow_runs/", {"flow_id": flow["id"], "name": "kept-in-postgresql"})
        stopped = _cli("server", "stop", env=env, cwd=tmp_path)
        assert stopped.returncode == 0 and not cluster.running(), stopped.stderr  # its own: stopped with it

        cluster.start()
        port = free_port()  # the first server's port may still be closing
        started = _cli("server", "start", "--port", str(port), "--database", cluster.url, env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        api = f"http://127.0.0.1:{port}/api"
        assert _get(f"{api}/flow_runs/{run['id']}")["name"] == "kept-in-postgresql"  # it outlived its server
        assert not (home / "prefect.db").exists()  # never SQLite
        status = _cli("server", "status", env={**env, "PREFECT_API_URL": api}, cwd=tmp_path)
        assert status.returncode == 0 and "answering" in status.stderr, status.stderr
        stopped = _cli("server", "stop", env=env, cwd=tmp_path)
        assert stopped.returncode == 0 and cluster.running(), stopped.stderr  # a database it was given stays up
    finally:
        _cli("server", "stop", env=env, cwd=tmp_path)
        cluster.stop()
        shutil.rmtree(cluster.folder, ignore_errors=True)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.loads(answer.read())
