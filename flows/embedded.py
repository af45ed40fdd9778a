"""Run the sweep flow in this process on Prefect's temporary server, quietly, and stop it cleanly.

Ctrl-C and SIGTERM: the first stops the sweep from scheduling anything new (running points finish
the stage they are in, see `chain`), the flow raises `SweepInterrupted` naming what is saved, and
the process exits through its normal path, which stops Prefect's server. A second signal kills
the running tools' process groups at once. For that the flow runs in a worker thread while the
main thread only waits and takes signals (Python runs handlers in the main thread; Prefect's own
SIGTERM handler, installed around a flow run in the main thread, would abort the flow mid-point).

Prefect's temporary server is started here, before the flow, the way Prefect starts it but in its
own session: a signal sent to the CLI's process group (Ctrl-C in a terminal, `kill -TERM -PGID`,
a supervisor) reaches only the CLI, so the server keeps answering while the sweep winds down. It
gets a parent-death signal instead, so it never outlives the CLI, even one killed with SIGKILL.

The server logs cancellation tracebacks from its background services when it stops; those are
Prefect's own shutdown noise, not sweep errors, so its loggers are silenced for the embedded run.
"""

from __future__ import annotations

import contextvars
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import prefect
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED, get_current_settings

from kernelsweep.expansion import DEFAULT_MAX_POINTS
from kernelsweep.flows import stopping
from kernelsweep.flows.progress import Listener, subscribe
from kernelsweep.flows.sweep import sweep
from kernelsweep.results.outcome import SweepOutcome
from kernelsweep.spec import SweepSpec
from kernelsweep.toolchain.process import kill_running_tools

_NOISY_LOGGERS = ("prefect.server", "uvicorn", "uvicorn.error", "prefect._internal", "prefect.client")
_PR_SET_PDEATHSIG = 1
log = logging.getLogger(__name__)


class _Stopping:
    """The signal that stopped the run, if any (for the exit code: 128 + signal)."""

    signal: int | None = None


stopped_by = _Stopping()


def run_sweep(
    spec: SweepSpec,
    on_row: Listener,
    *,
    resume_run_id: str | None = None,
    remeasure: bool = False,
    max_points: int = DEFAULT_MAX_POINTS,
) -> SweepOutcome:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    stopping.reset()
    stopped_by.signal = None
    with _signals_stop_the_sweep(), subscribe(on_row):
        _start_server()
        return _in_worker_thread(
            lambda: sweep(spec, resume_run_id=resume_run_id, remeasure=remeasure, max_points=max_points)
        )


@contextmanager
def _signals_stop_the_sweep() -> Iterator[None]:
    def handle(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if stopped_by.signal is None:
            stopped_by.signal = signum
            stopping.request_stop()
            log.warning(
                "%s: stopping; no new point starts, running ones finish their current stage "
                "(send it again to kill their tools)",
                name,
            )
        else:
            log.warning("%s again: killing %d running tool(s)", name, kill_running_tools())

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _in_worker_thread(work: Callable[[], SweepOutcome]) -> SweepOutcome:
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["report"] = context.run(work)
        except BaseException as exc:  # handed to the main thread, which raises it
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="sweep-flow", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.5)  # short waits: signal handlers run between them
    if "error" in outcome:
        raise outcome["error"]
    return outcome["report"]


def _start_server() -> None:
    """Prefect's temporary server, unless a server is configured (PREFECT_API_URL)."""
    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return
    _DetachedServer().start()


class _DetachedServer(SubprocessASGIServer):
    """Registered as Prefect's default temporary server (the `None` port key, as Prefect's own test
    harness does), so every Prefect client in this process uses it; started as Prefect starts its
    own (the same command and environment, prefect 3.9), in a new session that dies with us."""

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        server_env = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        argv = [
            sys.executable,
            "-m",
            "uvicorn",
            "--app-dir",
            str(prefect.__module_path__.parent),
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ]
        env = {**os.environ, **server_env, **get_current_settings().to_environment_variables(exclude_unset=True)}
        return subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=_dies_with(os.getpid()))


def _dies_with(parent: int) -> Callable[[], None]:
    """For the child, between fork and exec: SIGTERM when `parent` dies; gone already if it has."""
    libc = ctypes.CDLL(None, use_errno=True)

    def set_death_signal() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return set_death_signal
