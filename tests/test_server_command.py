"""`kernelsweep server`: a local Prefect server that repeated runs reuse through PREFECT_API_URL.

Real processes throughout: the command starts a real `prefect server start`, a real `kernelsweep run`
records its flow run there, and `stop` leaves no server behind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or exited and waiting for its new parent (init) to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_a_started_server_is_reused_by_runs_and_stopped_cleanly(tmp_path):
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_"))}
    env["PREFECT_HOME"] = str(home)
    port = _free_port()
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
    assert not _alive(recorded["pid"]) and not (home / STATE_FILE).exists()
    assert _cli("server", "status", env=env, cwd=tmp_path).returncode == 1
