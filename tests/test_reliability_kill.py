"""`kernelsweep run` killed at several moments and run again: every point exactly once, nothing that
had finished measured again, and no Prefect server left behind (the slow end-to-end variant).

The CLI runs as a user runs it, against moto's S3 over HTTP. The test watches the run's journal
(one object per finished point) to kill it at chosen moments of progress: SIGKILL of its process
group after the first point, SIGTERM of the group a few points later, then a run to the end. Each
finished point's journaled row is kept; the final rows must be those very rows (same capture, same
task runs, same row_id), so a point measured twice would show as a changed row.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import boto3
import pytest
from s3_server import aws_test_env, list_keys

from kernelsweep.flows.server import is_prefect_server
from kernelsweep.results import reader
from kernelsweep.results.journal import decode_row
from kernelsweep.results.rows import row_id
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.load import load_spec

pytestmark = pytest.mark.slow

# 16 points, compiles one at a time, tools slowed to 5% of their modelled time: several seconds of
# sweep, so kills land part-way.
SPEC = """
name = "killed"
platforms = ["trn2", "trn1"]
[execution]
compile_slots = 1
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.mlp:mlp"
dtypes = ["bfloat16", "float16"]
grid = { s = [128, 256], h = [256, 512], i = [128] }
"""
PROGRESS_TIMEOUT_S = 240
EXIT_TIMEOUT_S = 120
SERVER_GONE_TIMEOUT_S = 60


@pytest.fixture
def cli_env(tmp_path, moto_endpoint, bucket, prefect_home):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_", "KERNELSWEEP_"))}
    env |= {k: v for k, v in aws_test_env(moto_endpoint).items() if v is not None}
    env["PREFECT_HOME"] = str(prefect_home)
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"  # a loaded CI host starts it slowly
    env["KERNELSWEEP_STATE_DIR"] = str(tmp_path / "state")
    env["KERNELSWEEP_SIM_TIME_SCALE"] = "0.05"
    return env


class Journal:
    """The run's journal as the test sees it on S3: one object per finished point."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        self.client, self.endpoint, self.bucket = boto3.client("s3", endpoint_url=endpoint), endpoint, bucket

    def entries(self) -> list[str]:
        return [k for k in list_keys(self.endpoint, self.bucket, "results/_journal/") if "/points/" in k]

    def rows(self) -> dict:
        bodies = (self.client.get_object(Bucket=self.bucket, Key=k)["Body"].read() for k in self.entries())
        return {row.row_id: row for row in map(decode_row, bodies)}

    def wait_for(self, count: int, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while len(self.entries()) < count:
            assert proc.poll() is None, f"the sweep ended before {count} points were done: {proc.stderr.read()}"
            assert time.monotonic() < deadline, f"fewer than {count} points finished in {PROGRESS_TIMEOUT_S} s"
            time.sleep(0.1)  # polling interval, not a wait for the outcome


@pytest.fixture
def start():
    """Starts the CLI in its own process group; whatever a failing test leaves running is killed."""
    started: list[subprocess.Popen] = []

    def start(argv: list[str], env: dict, cwd: Path) -> subprocess.Popen:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=EXIT_TIMEOUT_S)
        if proc.stderr and not proc.stderr.closed:
            proc.stderr.close()


def _prefect_servers(prefect_home: str) -> list[int]:
    """Prefect server processes of this test (by their PREFECT_HOME), wherever they were reparented:
    the run's own (`prefect server start`) and any temporary one Prefect might start itself (uvicorn
    on `create_app`)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if is_prefect_server(int(proc.name)) or b"create_app" in (proc / "cmdline").read_bytes():
                if f"PREFECT_HOME={prefect_home}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
    return found


def _no_server_left(prefect_home: str) -> None:
    deadline = time.monotonic() + SERVER_GONE_TIMEOUT_S
    while _prefect_servers(prefect_home):
        assert time.monotonic() < deadline, f"Prefect server still running: {_prefect_servers(prefect_home)}"
        time.sleep(0.1)


def _interrupt(proc: subprocess.Popen, sig: signal.Signals) -> str:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    proc.wait(timeout=EXIT_TIMEOUT_S)
    stderr = proc.stderr.read()
    proc.stderr.close()
    return stderr


def test_a_sweep_killed_at_several_moments_and_resumed_measures_every_point_exactly_once(
    tmp_path, cli_env, bucket, moto_endpoint, start
):
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC)
    points = expand(load_spec(spec_path))
    assert len(points) == 16
    argv = [
        str(Path(sys.executable).parent / "kernelsweep"),
        "run",
        str(spec_path),
        "--toolchain",
        "sim",
        "--results",
        f"s3://{bucket}/results",
        "--artifacts",
        f"s3://{bucket}/artifacts",
    ]
    journal, home = Journal(moto_endpoint, bucket), cli_env["PREFECT_HOME"]

    # 1. SIGKILL of the whole process group after the first point: no handler runs at all.
    first = start(argv, cli_env, tmp_path)
    journal.wait_for(1, first)
    _interrupt(first, signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    _no_server_left(home)  # it dies with the CLI (parent-death signal), though in its own session
    after_kill = journal.rows()
    assert after_kill and not list_keys(moto_endpoint, bucket, "results/v1/")  # nothing half-written
    [run_id] = {row.flow_run_id for row in after_kill.values()}

    # 2. Resumed, then SIGTERM of the group a few points later: it stops scheduling, lets running
    #    points finish their stage, saves what finished, stops its server and exits 143.
    second = start(argv, cli_env, tmp_path)
    journal.wait_for(len(after_kill) + 3, second)
    stderr = _interrupt(second, signal.SIGTERM)
    assert second.returncode == 128 + signal.SIGTERM, stderr
    assert f"resuming run {run_id}" in stderr and f"reusing {len(after_kill)} finished point(s)" in stderr
    assert "SIGTERM: stopping; no new point starts" in stderr
    last = stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"error: interrupted: stopped with \d+ of 16 points done, saved in s3://.*", last), last
    assert "Traceback" not in stderr
    _no_server_left(home)
    after_term = journal.rows()
    assert len(after_term) >= len(after_kill) + 3 and not list_keys(moto_endpoint, bucket, "results/v1/")
    for rid, row in after_kill.items():
        assert after_term[rid] == row  # the first run's points were reused, not measured again

    # 3. Run to the end.
    done = subprocess.run(argv, env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"reused {len(after_term)} point(s) measured by the interrupted run" in done.stderr
    objects = list_keys(moto_endpoint, bucket, "results/v1/")
    assert sorted(k.rsplit("/", 1)[1] for k in objects) == [f"{run_id}.parquet"] * 2  # one per platform, no attempt-2
    rows = reader.read(f"s3://{bucket}/results").to_pylist()
    assert Counter((r["kernel"], r["shape"], r["dtype"], r["platform"]) for r in rows) == Counter(
        (p.kernel, p.shape, p.dtype, p.platform) for p in points
    )  # every point, exactly once
    assert sorted(r["row_id"] for r in rows) == sorted(row_id(run_id, p) for p in points)
    by_id = {r["row_id"]: r for r in rows}
    for rid, before in after_term.items():  # nothing that had finished was measured again
        after = by_id[rid]
        assert (after["ntff_sha256"], dict(after["task_run_ids"]), after["started_at"]) == (
            before.ntff_sha256,
            before.task_run_ids,
            before.started_at,
        )
    assert len({r["ntff_sha256"] for r in rows}) == 16 and all(r["status"] == "ok" for r in rows)
    assert journal.entries() == [] and not list_keys(moto_endpoint, bucket, "results/_journal/")
    _no_server_left(home)
