"""Two `kernelsweep run`s of one spec at once, and two resumes of one interrupted run at once, as real
processes on the simulator slowed to a few seconds of sweep (slow stage).

Exactly one of each pair proceeds; the other is refused at once (exit 3, one line naming the live
run's pid and host) and touches nothing; every point lands exactly once, and the points the killed
run had measured are the very rows the resumed run writes (nothing measured is thrown away).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kernelsweep.results import reader
from kernelsweep.results.journal import decode_row
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.load import load_spec

pytestmark = pytest.mark.slow

SPEC = """
name = "live"
platforms = ["trn2"]
toolchain = "sim"
[execution]
compile_slots = 1
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [4096], free_size = [1, 2, 4, 8, 16, 32] }
"""
SEARCH_SPEC = (
    SPEC.split("[[kernels]]")[0].replace('"live"', '"searched"')
    + """[[kernels]]
kernel = "matmul"
grid = { M = [512], K = [256], N = [1024] }
search = { budget = 6, seed = 3 }
"""
)
TIMEOUT_S = 300


@pytest.fixture
def cli(tmp_path, server_client_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_"))}
    env |= {
        **server_client_env,  # the session's server: the runs start none of their own
        "KERNELSWEEP_STATE_DIR": str(tmp_path / "state"),
        "KERNELSWEEP_SIM_TIME_SCALE": "0.2",  # a few seconds of sweep: the runs overlap
    }
    (tmp_path / "live.toml").write_text(SPEC)
    started: list[subprocess.Popen] = []

    def start(spec: str = "live.toml") -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "kernelsweep.flows.cli", "run", spec], cwd=tmp_path,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        if proc.stderr:
            proc.stderr.close()


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    proc.wait(timeout=TIMEOUT_S)
    assert proc.stderr is not None
    return proc.returncode, proc.stderr.read()


def _one_proceeds(first: subprocess.Popen, second: subprocess.Popen) -> None:
    """One exits 0 having run the sweep, the other exits 3 at once, naming the first's pid and host."""
    outcomes = {proc.pid: _finish(proc) for proc in (first, second)}
    refused = [pid for pid, (code, _) in outcomes.items() if code == 3]
    assert len(refused) == 1, outcomes
    [ran] = [pid for pid in outcomes if pid not in refused]
    code, message = outcomes[refused[0]]
    lines = [line for line in message.splitlines() if line.strip()]
    assert outcomes[ran][0] == 0, outcomes[ran][1]
    assert len(lines) == 1 and f"pid {ran} on {socket.gethostname()}" in lines[0], message


def _killed_after(proc: subprocess.Popen, entries: Path, points: int) -> None:
    """SIGKILL the run's process group once its journal holds `points` rows."""
    deadline = time.monotonic() + TIMEOUT_S
    while len(list(entries.rglob("points/*.json"))) < points:
        assert proc.poll() is None and time.monotonic() < deadline, f"the first run ended before {points} points"
        time.sleep(0.1)  # polling interval, not a wait for the outcome
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def _every_point_once(tmp_path: Path) -> list[dict]:
    rows = reader.read(str(tmp_path / "results")).to_pylist()
    points = expand(load_spec(tmp_path / "live.toml"))
    assert Counter((r["kernel"], r["shape"]) for r in rows) == Counter((p.kernel, p.shape) for p in points)
    assert not (tmp_path / "results" / "_journal").exists() or not any(
        p.is_file() and not p.name.startswith(".") for p in (tmp_path / "results" / "_journal").rglob("*")
    )
    return rows


def test_two_runs_of_one_spec_at_once_one_proceeds_and_the_other_names_it(tmp_path, cli):
    first, second = cli(), cli()
    _one_proceeds(first, second)
    _every_point_once(tmp_path)


def test_two_resumes_at_once_one_proceeds_and_no_measured_point_is_lost(tmp_path, cli):
    entries = tmp_path / "results" / "_journal"
    _killed_after(cli(), entries, 2)
    measured = {row.row_id: row for row in (decode_row(p.read_bytes()) for p in entries.rglob("points/*.json"))}
    first, second = cli(), cli()
    _one_proceeds(first, second)
    rows = {r["row_id"]: r for r in _every_point_once(tmp_path)}
    for row_id, row in measured.items():  # the killed run's rows, reused as they were
        assert rows[row_id]["ntff_sha256"] == row.ntff_sha256 and rows[row_id]["flow_run_id"] == row.flow_run_id


def test_a_killed_search_whose_study_log_is_then_damaged_resumes_with_every_trial_once(tmp_path, cli):
    """Was (issue 41): every later run of the spec exited 4 (JSONDecodeError) and the finished trials never
    reached the results. Now the damaged object is skipped with one warning naming it, and the resumed run
    completes with the killed run's trials, reused as they were, and the rest, each once."""
    (tmp_path / "searched.toml").write_text(SEARCH_SPEC)
    entries = tmp_path / "results" / "_journal"
    _killed_after(cli("searched.toml"), entries, 2)
    measured = {row.row_id: row for row in (decode_row(p.read_bytes()) for p in entries.rglob("points/*.json"))}
    [log, *_] = sorted(entries.rglob("log-*.json"), reverse=True)  # the study's newest object, cut in half
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    code, said = _finish(cli("searched.toml"))
    assert code == 0, said
    assert str(log.relative_to(tmp_path)) in said and "delete it" in said, said  # one warning naming the object
    trials = [r for r in reader.read(str(tmp_path / "results")).to_pylist() if r["search_trial"] is not None]
    ids = Counter(r["row_id"] for r in trials)
    assert set(measured) <= set(ids) and max(ids.values()) == 1, ids  # the killed run's trials, each once
    assert len({r["tunables"] for r in trials if r["flow_run_id"] == next(iter(measured.values())).flow_run_id}) >= 6
