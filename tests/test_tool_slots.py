"""Compile slots with early starts: a trace worker starts (Python, the SDK's imports) while its
thread waits for a slot, and works only once told to go; at most one more started worker waits per
slot. Real subprocesses; every wait is for a condition, with a deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from standin_host import POINT

from kernelsweep.kernels.vector_add import VectorAdd
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.toolchain import tracing
from kernelsweep.toolchain.process import Slots, ToolResult, run_tool
from kernelsweep.toolchain.tracing import JOB_FILE, RESULT_FILE
from kernelsweep.toolchain.tracing.interpreter import own_python, worker_argv

DEADLINE_S = 60
READ_SYSCALLS = {"0", "63"}
TIMEOUT_S = 0.5  # the early-started tool's: its wait for a slot is not timed
# A tool started early: says it started, waits for its go, then holds its slot until `release` exists.
TOOL = """
import os, sys, time
log, name, release = sys.argv[1:4]
def note(what):
    with open(log, "a") as handle:
        handle.write(f"{what} {name}\\n")
note("start")
note("go" if sys.stdin.readline() == "go\\n" else "no-go")
while not os.path.exists(release):
    time.sleep(0.01)
note("done")
"""


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_tools_start_while_they_wait_and_work_one_slot_at_a_time(tmp_path):
    log, release = tmp_path / "log", tmp_path / "release"
    slots = Slots(1)
    results: dict[str, ToolResult] = {}

    def run(name: str) -> None:
        argv = [sys.executable, "-c", TOOL, str(log), name, str(release)]
        results[name] = run_tool(argv, timeout_seconds=DEADLINE_S, slots=slots)

    threads = [threading.Thread(target=run, args=(name,)) for name in "abc"]
    for thread in threads:
        thread.start()
    # one at work, one started and waiting; the third may not start until the first is done
    _wait_for(lambda: sum(line.startswith("start") for line in _lines(log)) >= 2, "two starts")
    _wait_for(lambda: any(line.startswith("go") for line in _lines(log)), "a go")
    started = [line for line in _lines(log) if line.startswith("start")]
    assert len(started) == 2 and sum(line.startswith("go") for line in _lines(log)) == 1
    release.touch()
    for thread in threads:
        thread.join(DEADLINE_S)
    lines = _lines(log)
    assert sorted(r.returncode for r in results.values()) == [0, 0, 0]
    assert not any(line.startswith("no-go") for line in lines)
    goes = [line.split()[1] for line in lines if line.startswith("go")]
    first, second, third = goes
    # one slot: each go comes after the previous holder is done
    assert lines.index(f"go {second}") > lines.index(f"done {first}")
    assert lines.index(f"go {third}") > lines.index(f"done {second}")
    # the waiting place: the third started only once the first had left its slot
    assert lines.index(f"start {third}") > lines.index(f"done {first}")
    # the second started before the first was done: its start-up overlapped the wait
    assert lines.index(f"start {second}") < lines.index(f"done {first}")


def test_a_tool_started_early_is_timed_from_its_go(tmp_path):
    log, release = tmp_path / "log", tmp_path / "release"
    slots = Slots(1)
    argv = [sys.executable, "-c", TOOL, str(log), "t", str(release)]
    with slots:  # the slot is taken: the tool starts and waits
        thread_result: list[ToolResult] = []
        thread = threading.Thread(
            target=lambda: thread_result.append(run_tool(argv, timeout_seconds=TIMEOUT_S, slots=slots))
        )
        thread.start()
        _wait_for(lambda: "start t" in _lines(log), "the early start")
        waited = time.monotonic()
        _wait_for(
            lambda: time.monotonic() - waited > 2 * TIMEOUT_S, "twice the tool's timeout"
        )  # the wait is not timed
        assert "go t" not in _lines(log)
    _wait_for(lambda: "go t" in _lines(log), "the go")
    release.touch()
    thread.join(DEADLINE_S)
    [result] = thread_result
    assert not result.timed_out and result.returncode == 0
    assert result.seconds < TIMEOUT_S


def test_a_trace_worker_loads_its_tracer_while_it_waits_and_traces_on_its_go(tmp_path):
    """The worker is running and blocked on its stdin (its tracer loaded: it reads only after) while
    the slot is held elsewhere; it traces once the slot is free. Started again with no go (the sweep
    ended), it leaves without tracing."""
    sim = sim_toolchain(tmp_path / "sim")
    request = tracing.TraceRequest.for_point(POINT, VectorAdd(), "trn2")
    workdir = tmp_path / "work"
    slots = Slots(1)
    out: list[tracing.TraceOutput] = []
    with slots:  # the only slot, held by another compile
        thread = threading.Thread(
            target=lambda: out.append(tracing.trace(sim, request, workdir, timeout_seconds=120, slots=slots))
        )
        thread.start()
        workers = _worker_pids(workdir)
        _wait_for(lambda: any(_reading_stdin(pid) for pid in workers), "the worker to wait on its stdin")
        assert not (workdir / RESULT_FILE).exists()
    thread.join(DEADLINE_S)
    [traced] = out
    assert traced.neff_path is not None and traced.neff_path.is_file() and traced.worker_seconds > 0

    (workdir / RESULT_FILE).unlink()
    argv = worker_argv(own_python(), workdir, workdir / JOB_FILE, {})
    again = subprocess.run(argv, input="", capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert again.returncode == 0, again.stderr
    assert not (workdir / RESULT_FILE).exists()


def _worker_pids(workdir: Path) -> list[int]:
    """The processes working in the trace worker's folder: its command and, forked from the run's
    template, the worker itself (whose command line is the template's)."""
    found: list[int] = []

    def look() -> bool:
        found.clear()
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and Path(os.readlink(entry / "cwd")) == workdir:
                    found.append(int(entry.name))
            except OSError:
                continue
        return len(found) == 2

    _wait_for(look, "the trace worker's processes")
    return found


def _reading_stdin(pid: int) -> bool:
    """Blocked in read(0, ...): the syscall number of read (x86_64 0, arm64 63) and fd 0."""
    fields = Path(f"/proc/{pid}/syscall").read_text().split()  # "running" while it runs
    return len(fields) > 1 and fields[0] in READ_SYSCALLS and fields[1] == "0x0"
