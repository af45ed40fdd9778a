"""Faults a sweep meets on its host (fast variants, in-process through Prefect's test harness):
a NeuronCore held by a wedged process, and a store whose bytes went bad.

docs/reliability.md lists these tests against the faults they prove.
"""

from __future__ import annotations

import contextvars
import logging
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from specs import sim_spec

from kernelsweep.results import reader
from kernelsweep.stores.artifacts import sha256_file

pytestmark = pytest.mark.usefixtures("prefect_harness")
REPO = Path(__file__).resolve().parents[1]
GIVE_UP_DEADLINE_S = 90  # the lease timeout is 1 s; a sweep of one point takes a few
VECTOR_ADD = {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"], "grid": {"n": [2048]}}


@contextmanager
def _notices(logger_name: str = "kernelsweep") -> Iterator[list[str]]:
    """Warnings of kernelsweep's loggers, collected on the logger itself (Prefect reconfigures the root's
    handlers when it sets up logging, which would drop pytest's)."""
    said: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger, handler = logging.getLogger(logger_name), Collect(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield said
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def own_sim_state(tmp_path, monkeypatch) -> Path:
    """This test's own simulated host, so holding its cores disturbs no other test."""
    state = tmp_path / "sim-state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(state))
    return state


def test_a_capture_waiting_on_a_wedged_holder_says_who_and_becomes_a_failed_row(tmp_path, own_sim_state, monkeypatch):
    from kernelsweep.flows.sweep import sweep

    monkeypatch.setenv("KERNELSWEEP_LEASE_TIMEOUT_SECONDS", "1")
    leases = own_sim_state / "leases"
    wedge = tmp_path / "wedge.py"
    wedge.write_text(
        textwrap.dedent(
            f"""
            import sys
            from kernelsweep.locks import CoreLeaser
            held = [CoreLeaser({str(leases)!r}, [c]).try_acquire("wedged") for c in range(4)]
            assert all(held)
            print("ready", flush=True)
            sys.stdin.read()
            """
        )
    )
    holder = subprocess.Popen(
        [sys.executable, str(wedge)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "ready\n"
        started, outcome = time.monotonic(), []
        with _notices("kernelsweep.locks") as said:
            # In a thread, so a wait without limit fails this test instead of hanging it: after the
            # deadline the holder lets go, which ends any wait.
            worker = threading.Thread(
                target=lambda: outcome.append(contextvars.copy_context().run(sweep, sim_spec(tmp_path, [VECTOR_ADD]))),
            )
            worker.start()
            worker.join(GIVE_UP_DEADLINE_S)
            took = time.monotonic() - started
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
    worker.join(120)
    assert took < GIVE_UP_DEADLINE_S, "the capture waited past the lease timeout for a core held elsewhere"
    [row] = outcome[0].rows
    assert row.status == "failed" and row.error_stage == "capture" and row.error_class == "LeaseTimeout"
    assert f"pid {holder.pid}" in row.error_message and "wedge.py" in row.error_message
    assert any(f"core 0: pid {holder.pid}" in m and "giving up after 1 s" in m for m in said), said


def _store_file(root: Path, sha: str) -> Path:
    return root / "sha256" / sha[:2] / sha


def _corrupt(path: Path) -> None:
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _rows(tmp_path: Path, run_id: str) -> list[dict]:
    return [r for r in reader.read(str(tmp_path / "results")).to_pylist() if r["flow_run_id"] == run_id]


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_the_store_heals_corrupt_artifacts_and_cache_entries(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = sim_spec(tmp_path, [VECTOR_ADD], name="heal")
    store = tmp_path / "artifacts"
    [first] = _rows(tmp_path, sweep(spec).flow_run_id)
    assert first["status"] == "ok" and first["compile_cache_hit"] is False

    # A cached NEFF whose bytes went bad: found on lookup, moved aside (kept in the store's quarantine
    # folder), traced and compiled again (current NKI compiles in the tracing call, so the trace entry
    # names the NEFF), with a notice.
    _corrupt(_store_file(store, first["neff_sha256"]))
    with _notices() as said:
        [second] = _rows(tmp_path, sweep(spec).flow_run_id)
    assert second["status"] == "ok" and second["trace_cache_hit"] is False and second["compile_cache_hit"] is False
    assert sha256_file(_store_file(store, second["neff_sha256"])) == second["neff_sha256"]
    assert "is corrupt" in " ".join(said) and "moved aside, rebuilding it" in " ".join(said)
    assert len(list((store / "quarantine").glob(f"{first['neff_sha256']}.*.corrupt"))) == 1

    # A cache entry that is not JSON any more: a miss with a notice, rebuilt, not a failure forever.
    [entry] = (store / "index" / "cache-v1" / "trace").rglob("*.json")
    entry.write_bytes(b"\x00garbage")
    with _notices() as said:
        [third] = _rows(tmp_path, sweep(spec).flow_run_id)
    assert third["status"] == "ok" and third["trace_cache_hit"] is False
    assert "cannot be read" in " ".join(said)

    # An input artifact gone bad: the inputs are cached by content, so the lookup finds it, removes it
    # and writes it again; the point measures as usual and its inputs verify.
    [first_input] = [ref for ref in third["inputs"] if ref["name"] == "a_input"] or third["inputs"][:1]
    _corrupt(_store_file(store, first_input["sha256"]))
    with _notices() as said:
        [healed] = _rows(tmp_path, sweep(spec).flow_run_id)
    assert healed["status"] == "ok" and "is corrupt" in " ".join(said)
    assert sha256_file(_store_file(store, first_input["sha256"])) == first_input["sha256"]


def test_lineage_fetches_copies_not_links_into_the_store(tmp_path):
    from kernelsweep.flows.sweep import sweep
    from kernelsweep.results.verify import verify_row

    spec = sim_spec(tmp_path, [VECTOR_ADD], name="copies")
    [row] = _rows(tmp_path, sweep(spec).flow_run_id)
    report = verify_row(str(tmp_path / "results"), row["row_id"], tmp_path / "fetched")
    assert report.ok
    for check in report.artifacts:
        stored = _store_file(tmp_path / "artifacts", check.sha256)
        assert os.stat(check.path).st_ino != os.stat(stored).st_ino
        os.chmod(check.path, stat.S_IRUSR | stat.S_IWUSR)
        check.path.write_bytes(b"edited by the user")  # as root, a read-only mode would not stop this
        assert sha256_file(stored) == check.sha256


def test_ctrl_c_stops_the_sweep_and_a_second_one_kills_the_running_tools():
    """The CLI's handlers: the first signal asks every run to stop (and is remembered, for the exit
    code 128 + signal), the second kills the process group of every tool still running."""
    import signal

    from kernelsweep.flows import embedded, stopping
    from kernelsweep.toolchain import process
    from kernelsweep.toolchain.process import run_tool

    results = []
    tool = threading.Thread(
        target=lambda: results.append(run_tool([sys.executable, "-c", "import time; time.sleep(120)"],
                                               timeout_seconds=300)))  # fmt: skip
    stopping.reset()
    before = signal.getsignal(signal.SIGINT)  # the default, or SIG_IGN in a shell's background job
    try:
        with _notices("kernelsweep.flows") as said, embedded._signals_stop_the_sweep():
            tool.start()
            deadline = time.monotonic() + 30
            while not process._running:  # the tool has started
                assert time.monotonic() < deadline
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGINT)
            while not stopping.stop_requested():
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert embedded.stopped_by.signal == signal.SIGINT and tool.is_alive()
            os.kill(os.getpid(), signal.SIGINT)
            tool.join(30)
    finally:
        stopping.reset()
        embedded.stopped_by.signal = None
    assert not tool.is_alive() and results[0].returncode == -signal.SIGKILL
    assert said[0].startswith("SIGINT: stopping; no new point starts") and "killing 1 running tool" in said[1]
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored
