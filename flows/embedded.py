"""Run the sweep flow in this process on a Prefect server of the run's own, quietly, and stop it cleanly.

Ctrl-C and SIGTERM: the first stops the sweep from scheduling anything new (running points finish
the stage they are in, see `chain`), the flow raises `SweepInterrupted` naming what is saved, and
the process exits through its normal path, which stops the run's server. A second signal kills
the running tools' process groups at once. For that the flow runs in a worker thread while the
main thread only waits and takes signals (Python runs handlers in the main thread; Prefect's own
SIGTERM handler, installed around a flow run in the main thread, would abort the flow mid-point).

Without a configured Prefect API (PREFECT_API_URL), the run starts a Prefect server of its own
(`start_api`), where Prefect's ephemeral mode would start its temporary one: on a free loopback
port, on the same Prefect home, with the same services (`kernelsweep.flows.server`, the one
launcher, which also gives it the batched recording every kernelsweep server uses), and points this
process's Prefect client at it with Prefect's public settings API. It is
started as soon as Prefect's settings are read, so it boots while the flow's modules import. It runs
in its own session: a signal sent to the CLI's process group (Ctrl-C in a terminal, `kill -TERM
-PGID`, a supervisor) reaches only the CLI, so the server keeps answering while the sweep winds down.
It gets a parent-death signal instead, so it never outlives the CLI, even one killed with SIGKILL;
otherwise it is stopped when the run is over, once Prefect's client has sent it what it queued.

The server's output (its banner, the cancellation tracebacks its services log when it stops) goes
to an unnamed temporary file, read only to explain a failed start; the client's own Prefect loggers
are silenced for the run: that is Prefect's shutdown noise, not sweep errors.
"""

from __future__ import annotations

import contextvars
import logging
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, TypeVar

from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_SERVER_EPHEMERAL_ENABLED,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    get_current_settings,
    temporary_settings,
)

from kernelsweep.flows import server, stopping
from kernelsweep.flows.progress import Listener, subscribe
from kernelsweep.results import SweepOutcome
from kernelsweep.sweepspec import DEFAULT_MAX_POINTS, SweepSpec
from kernelsweep.toolchain import kill_running_tools

_NOISY_LOGGERS = ("prefect.server", "uvicorn", "uvicorn.error", "prefect._internal", "prefect.client")
SERVER_STOP_GRACE_SECONDS = 5.0  # as Prefect gives its temporary server; it stops in well under 1 s
log = logging.getLogger(__name__)
T = TypeVar("T")


class _Stopping:
    """The signal that stopped the run, if any (for the exit code: 128 + signal)."""

    signal: int | None = None


stopped_by = _Stopping()


def run_sweep(
    spec: SweepSpec,
    on_row: Listener,
    *,
    api: PrefectApi | None = None,
    resume_run_id: str | None = None,
    remeasure: bool = False,
    max_points: int = DEFAULT_MAX_POINTS,
) -> SweepOutcome:
    """The sweep flow, in a worker thread, against `api` (from `start_api`, started here if not)."""
    api = api or start_api()
    from kernelsweep.flows.sweep import sweep  # the flow's modules: imported while a server boots

    return run_flow(
        lambda: sweep(spec, resume_run_id=resume_run_id, remeasure=remeasure, max_points=max_points), on_row, api
    )


def run_flow(work: Callable[[], T], on_row: Listener, api: PrefectApi) -> T:
    """A flow call (`work`), in a worker thread, against `api`, stopped by the first signal: what
    `run_sweep` does for the sweep, for any flow that runs sweeps (`kernelsweep tuned recheck`)."""
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    stopping.reset()
    stopped_by.signal = None
    with _signals_stop_the_sweep(), subscribe(on_row), api.in_use():
        return _in_worker_thread(work)


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


def _in_worker_thread(work: Callable[[], T]) -> T:
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


@dataclass
class PrefectApi:
    """The Prefect API a run talks to: the configured one (no `process`), or a server of the run's
    own, launched by `start_api` and waited for, used and stopped by `in_use`."""

    url: str | None = None
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    start_timeout_seconds: float = server.START_TIMEOUT_SECONDS

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Wait for the server to answer, point this process's Prefect client at it, and stop it
        (after sending it what the client queued) when the `with` ends, however it ends."""
        if self.process is None or self.log is None or self.url is None:
            yield
            return
        try:
            server.wait_healthy(self.process, self.url, log=self.log, timeout_seconds=self.start_timeout_seconds)
            with temporary_settings({PREFECT_API_URL: self.url}):
                try:
                    yield
                finally:
                    _send_what_is_queued()
        finally:
            server.terminate_tree(self.process, grace_seconds=SERVER_STOP_GRACE_SECONDS)
            self.log.close()


def start_api() -> PrefectApi:
    """The configured Prefect API; without one (and unless ephemeral mode is off, when Prefect itself
    refuses to run), a server of the run's own, launched now so that it boots while the caller
    imports the flow. Call it from the main thread, which lives as long as the run: the parent-death
    signal is tied to the thread that starts the server (which also stops it, should the run never
    come to `in_use`)."""
    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return PrefectApi()
    port = server.free_port()
    log = tempfile.TemporaryFile()
    process = server.launch(server.LOOPBACK, port, run_server_env(), log, ui=False, dies_with_caller=True)
    return PrefectApi(
        url=server.api_url(server.LOOPBACK, port),
        process=process,
        log=log,
        start_timeout_seconds=float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()),
    )


def run_server_env() -> dict[str, str]:
    """The environment of a run's own server: a temporary server's services, the batched recording
    every kernelsweep server uses, then this process's environment and the settings it read from the
    working folder (prefect.toml, .env) or a profile, as Prefect hands them to its own temporary
    server (the server runs elsewhere, see the launcher)."""
    settings = get_current_settings().to_environment_variables(exclude_unset=True)
    env = {**server.TEMPORARY_SERVER_SETTINGS, **server.BATCHED_RECORDING_SETTINGS, **os.environ, **settings}
    # Its output reaches no terminal, only a file kept to explain a failed start: errors in it (the
    # quiet CLI's CRITICAL would leave only Prefect's "Server stopped!").
    env["PREFECT_SERVER_LOGGING_LEVEL"] = "ERROR"
    return env


def _send_what_is_queued() -> None:
    """Prefect's client sends logs and events from background queues that it drains at interpreter
    exit; by then this run's server is gone ("Error logging to API" on the terminal when logs are on).
    Drain them while it still answers."""
    APILogWorker.drain_all(timeout=SERVER_STOP_GRACE_SECONDS)
    EventsWorker.drain_all(timeout=SERVER_STOP_GRACE_SECONDS)
