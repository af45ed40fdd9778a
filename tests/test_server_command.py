"""`kernelsweep server`: a local Prefect server that repeated runs reuse through PREFECT_API_URL.

Real processes throughout: the command starts a real `prefect server start`, a real `kernelsweep run`
records its flow run there, and `stop` leaves no server behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prefect_server import alive, free_port

from kernelsweep.flows.cli.server import STATE_FILE

NOISE = ("Traceback", "CancelledError", "telemetry", "database is locked")
SPEC = """
name = "server-reuse"
platforms = ["trn2"]
toolchain = "sim"
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [2048] }
"""


def _cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout,
    )  # fmt: skip


def _flow_runs(api_url: str) -> list[dict]:
    request = urllib.request.Request(
        f"{api_url}/flow_runs/filter", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.mark.slow
def test_a_started_server_is_reused_by_runs_and_stopped_cleanly(tmp_path, prefect_home):
    home = prefect_home
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_"))}
    env["PREFECT_HOME"] = str(home)
    port = free_port()
    started = _cli("server", "start", "--port", str(port), env=env, cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stderr
        api_url = f"http://127.0.0.1:{port}/api"
        assert started.stdout.strip() == f"export PREFECT_API_URL={api_url}"  # the one line to copy
        recorded = json.loads((home / STATE_FILE).read_text())
        assert _cli("server", "status", env=env, cwd=tmp_path).returncode == 0

        again = _cli("server", "start", "--port", str(port), env=env, cwd=tmp_path)
        assert again.returncode == 0 and "already running" in again.stderr
        assert json.loads((home / STATE_FILE).read_text())["pid"] == recorded["pid"]  # not a second server

        taken = _cli("server", "start", "--port", str(port), env={**env, "PREFECT_HOME": str(tmp_path / "other")},
                     cwd=tmp_path)  # fmt: skip
        assert taken.returncode == 2 and taken.stderr.count("\n") == 1 and f"port {port}" in taken.stderr

        (tmp_path / "spec.toml").write_text(SPEC)
        run = _cli("run", "spec.toml", "--results", str(tmp_path / "results"), "--artifacts",
                   str(tmp_path / "artifacts"), env={**env, "PREFECT_API_URL": api_url}, cwd=tmp_path)  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert not any(word in run.stdout + run.stderr for word in NOISE)
        assert [r["name"] for r in _flow_runs(api_url)] == ["sweep-server-reuse"]  # recorded on our server
    finally:
        stopped = _cli("server", "stop", env=env, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert not alive(recorded["pid"]) and not (home / STATE_FILE).exists()
    assert _cli("server", "status", env=env, cwd=tmp_path).returncode == 1


def _backdate(db_file: Path, before: str, days: int) -> int:
    """Move every finished flow run, and every event, older than `before` back by `days` (as if that
    sweep ran `days` ago); the number of flow runs moved."""

    def earlier(stamp: str) -> str:
        return (datetime.fromisoformat(stamp) - timedelta(days=days)).strftime("%Y-%m-%d %H:%M:%S.%f")

    with contextlib.closing(sqlite3.connect(db_file, timeout=60)) as db, db:
        runs = db.execute("SELECT id, end_time FROM flow_run WHERE end_time < ?", (before,)).fetchall()
        db.executemany("UPDATE flow_run SET end_time = ? WHERE id = ?", [(earlier(end), i) for i, end in runs])
        for table in ("events", "event_resources"):
            rows = db.execute(f"SELECT id, occurred FROM {table} WHERE occurred < ?", (before,)).fetchall()
            db.executemany(f"UPDATE {table} SET occurred = ? WHERE id = ?", [(earlier(o), i) for i, o in rows])
    return len(runs)


def _counts(db_file: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(db_file, timeout=60)) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in RECORD_TABLES}


RECORD_TABLES = ("flow_run", "task_run", "task_run_state", "artifact", "events", "event_resources")


@pytest.mark.slow
def test_the_servers_retention_deletes_sweeps_older_than_a_week_and_keeps_recent_ones(tmp_path, prefect_home):
    """The database stays bounded: what `kernelsweep server` (and docs/fleet.md for a fleet server)
    sets makes Prefect's vacuum delete a sweep's flow run, task runs, states, artifacts and events
    once they are older than the retention period, and leave a recent sweep alone."""
    home = prefect_home
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_"))}
    env |= {"PREFECT_HOME": str(home), "PREFECT_SERVER_SERVICES_DB_VACUUM_LOOP_SECONDS": "1"}  # not hourly
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    started = _cli("server", "start", "--port", str(port), env=env, cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stderr
        (tmp_path / "spec.toml").write_text(SPEC)
        sweep = ["run", "spec.toml", "--results", str(tmp_path / "results"), "--artifacts", str(tmp_path / "a")]
        assert _cli(*sweep, env={**env, "PREFECT_API_URL": api_url}, cwd=tmp_path).returncode == 0
        between = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        assert _cli(*sweep, "--remeasure", env={**env, "PREFECT_API_URL": api_url}, cwd=tmp_path).returncode == 0
        db_file = home / "prefect.db"
        before = _counts(db_file)
        assert len(_flow_runs(api_url)) == 2 and before["task_run"] >= 2 * 5 and before["artifact"] >= 2

        assert _backdate(db_file, between, days=8) == 1
        deadline = time.monotonic() + 120
        while not all((after := _counts(db_file))[t] < before[t] for t in RECORD_TABLES):
            assert time.monotonic() < deadline, f"the vacuum left {after} of {before} within 120 s"
            time.sleep(1)
        kept = _flow_runs(api_url)
    finally:
        _cli("server", "stop", env=env, cwd=tmp_path)
    assert len(kept) == 1 and kept[0]["end_time"] > between.replace(" ", "T")  # the recent sweep stays
    for table in RECORD_TABLES:  # the old sweep's rows are gone, about half of each kind
        assert 0 < after[table] < before[table], (table, before[table], after[table])
