"""Run one external tool: argv list, no shell, a timeout that kills the whole process group, and (on
Linux) a parent-death signal, so a hung tool never outlives a run killed outright (SIGKILL, OOM).

A foreign tool gets the signal from a tiny launcher (`python -I -S -c`, no user code on its path)
that arms it and then execs the tool, as kernelsweep.flows.server does for the Prefect server:
`preexec_fn` is unsafe in a threaded process. kernelsweep's own entry points (the simulator's tools,
the trace and benchmark workers) arm it themselves and skip the launcher's interpreter start
(`parent_death`). The kernel sends it when the thread that started the tool ends; a tool is
started and waited for by the same thread, which lives as long as the call does.

A tool run through `Slots` starts at once and is told to go (one line on its stdin) when a slot is
free: its start-up overlaps the wait, and its time and timeout count from the go.
"""

from __future__ import annotations

import contextvars
import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from kernelsweep.toolchain.parent_death import GO, PARENT_ENV, arms_itself

logger = logging.getLogger(__name__)
_running: set[subprocess.Popen] = set()  # for `kill_running_tools`: a second Ctrl-C ends them at once
_running_lock = threading.Lock()
# argv[1] is the run's pid, argv[2] the tool's path, argv[3:] its argv.
_DIE_WITH_RUN = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)  # the run died before the signal was armed\n"
    "os.execv(sys.argv[2], sys.argv[3:])\n"
)


@dataclass(frozen=True)
class ToolResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # what the caller set for this run (not inherited)
    seconds: float = 0.0  # the tool's wall time, start (or go) to exit: what `bench` tells apart from its own

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


T = TypeVar("T")


class Slots:
    """At most `count` tools at work at once, and at most `count` more started early and waiting for
    a slot: a trace worker's start-up (Python and the Neuron SDK's imports, seconds on a real host)
    needs no slot, so it happens during the wait instead of in the slot, and idle started workers
    (the SDK imported, no compile's memory yet) never outnumber the working ones. `with slots:`
    holds a slot for work started in the slot."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._working = threading.BoundedSemaphore(count)
        self._waiting = threading.BoundedSemaphore(count)

    def __enter__(self) -> Slots:
        self._working.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._working.release()

    @contextmanager
    def after(self, start: Callable[[], T]) -> Iterator[T]:
        """`start()` in a waiting place, then a slot for what it started, held to the block's end."""
        with self._waiting:
            started = start()
            self._working.acquire()
        try:
            yield started
        finally:
            self._working.release()


_recording: contextvars.ContextVar[list[ToolResult] | None] = contextvars.ContextVar("tool_runs", default=None)


@contextmanager
def recording() -> Iterator[list[ToolResult]]:
    """Every tool run in this context, in order: the smoke check shows the adapters' own runs."""
    runs: list[ToolResult] = []
    token = _recording.set(runs)
    try:
        yield runs
    finally:
        _recording.reset(token)


def run_tool(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    unset: Sequence[str] = (),
    timeout_seconds: float,
    slots: Slots | None = None,
) -> ToolResult:
    """Run argv to completion; never raises for a non-zero exit, callers classify the result.

    The tool gets its own session so a timeout can kill everything it spawned (compilers fork
    workers), not just the direct child. `unset` names variables the tool must not inherit from
    this process (a value in `env` still wins). With `slots`, the tool is started early and holds a
    slot from its go (`GO` on its stdin) to its exit; it must wait for that line.
    """
    argv = [str(a) for a in argv]
    full_env = {k: v for k, v in os.environ.items() if k not in unset} | dict(env or {})
    logger.debug("running %s", " ".join(argv))
    start = partial(_start, argv, full_env, cwd, slots is not None)
    with slots.after(start) if slots else nullcontext(start()) as proc:
        try:
            started = time.monotonic()
            result = _finish(proc, argv, env, GO if slots else None, timeout_seconds)
        finally:
            with _running_lock:
                _running.discard(proc)
    result = replace(result, seconds=time.monotonic() - started)
    runs = _recording.get()
    if runs is not None:
        runs.append(result)
    return result


def _start(argv: list[str], env: Mapping[str, str], cwd: str | Path | None, early: bool) -> subprocess.Popen:
    launched, env = _dies_with_run(argv, env, cwd)
    proc = subprocess.Popen(
        launched,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if early else subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    with _running_lock:
        _running.add(proc)
    return proc


def _finish(
    proc: subprocess.Popen, argv: list[str], env: Mapping[str, str] | None, go: str | None, timeout_seconds: float
) -> ToolResult:
    try:
        stdout, stderr = proc.communicate(go, timeout=timeout_seconds)
        return ToolResult(argv, proc.returncode, stdout, stderr, env=dict(env or {}))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = proc.communicate()
        return ToolResult(argv, proc.returncode, stdout, stderr, timed_out=True, env=dict(env or {}))
    except BaseException:  # the caller's thread interrupted: the tool must not outlive the call
        _kill_group(proc)
        raise


def _dies_with_run(argv: list[str], env: Mapping[str, str], cwd: str | Path | None) -> tuple[list[str], dict[str, str]]:
    """What to start (Linux): kernelsweep's own entry point as it is, told this run's pid; any other
    tool inside the launcher. The launched tool is found here, so a missing one raises FileNotFoundError
    in the caller as Popen would."""
    env = {k: v for k, v in env.items() if k != PARENT_ENV}  # never inherited: only run_tool says it
    if sys.platform != "linux":
        return argv, env
    if arms_itself(argv):
        return argv, {**env, PARENT_ENV: str(os.getpid())}
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH", os.defpath))
    if exe is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
    if cwd is not None:
        exe = os.path.join(cwd, exe)  # a relative path, as Popen resolves it: from the tool's folder
    if not os.access(exe, os.X_OK) or os.path.isdir(exe):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), argv[0])
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_RUN, str(os.getpid()), exe, *argv], env


def kill_running_tools() -> int:
    """Kill the process group of every tool this process is running; returns how many."""
    with _running_lock:
        running = list(_running)
    for proc in running:
        _kill_group(proc)
    return len(running)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
