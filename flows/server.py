"""The one way kernelsweep starts a Prefect API server: for `kernelsweep run` without PREFECT_API_URL
(a server of the run's own), `kernelsweep server start`, the tests and the benchmarks.

What runs is Prefect's public command, `prefect server start`, through `kernelsweep.flows.server_process`
(Prefect's command line after one fix that makes a server's database writes cheaper; its docstring says
which and why). The alternative, uvicorn on Prefect's `create_app` factory (what Prefect's own
temporary server runs), is made "ephemeral" only by private double-underscore variables and by a
private method this project once overrode; a Prefect patch release may change either without notice.
What the temporary server leaves out (the UI, the loop services that schedule, mark late, reclaim
leases or vacuum) is turned off instead with Prefect's public settings (`TEMPORARY_SERVER_SETTINGS`),
so the run's server does what Prefect's would.

Every server here starts the same way, and each choice has a reason:
- `python -P -m kernelsweep.flows.server_process` (that is, `prefect`), with PYTHONSAFEPATH=1 in its
  environment (which its own children inherit): the working folder never goes on its import path, so
  a `click.py` or `uvicorn.py` where the user happens to be is never imported by the server.
- In a session of its own: a Ctrl-C or a `kill -TERM -PGID` sent to the caller's process group
  (a terminal, a supervisor) does not reach it, so it keeps answering while a sweep winds down.
- Optionally dying with its caller (`dies_with_caller`), even one killed with SIGKILL: a few-line
  `python -I -S -c` launcher arms the kernel's parent-death signal (PR_SET_PDEATHSIG, SIGTERM),
  checks its parent is still the caller, and `execv`s the server. Not a Python hook run between
  fork and exec, which Python documents as unsafe in a process with threads (Prefect starts
  several). The signal is tied to the *thread* that started the process: call `launch` from a
  thread that lives as long as the server should (the main thread).
- In a working folder no user writes to (`/`, unless the caller names one): Prefect's database
  migrations, run at every start, put the server's working folder first on its import path
  (alembic's `prepend_sys_path = .`), -P or not. A relative PREFECT_HOME is made absolute first.
- Output to a log file, stdin from /dev/null: nothing it prints reaches the caller's terminal.

`api_call` is one REST call to a started server, retried on what Prefect's client retries: the
tests' harness and the server benchmark read their servers through it.

Nothing here imports Prefect, so a caller can start a server before importing it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from kernelsweep.errors import KernelsweepError

LOOPBACK = "127.0.0.1"
START_TIMEOUT_SECONDS = 180.0  # a fresh database migrates first; a loaded host is slower still
STOP_GRACE_SECONDS = 30.0  # SIGTERM lets the server flush what it recorded; SIGKILL after this
_POLL_SECONDS = 0.2
NEUTRAL_FOLDER = Path("/")  # the server's working folder: nothing a user wrote is imported from it
# Turned off to make a server what Prefect's temporary one is: an API for one process's runs, with the
# services that record them (events, task runs, triggers) and none that act on the database alone.
TEMPORARY_SERVER_SETTINGS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_LATE_RUNS_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_FOREMAN_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_REPOSSESSOR_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_PAUSE_EXPIRATIONS_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_CANCELLATION_CLEANUP_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_CLEANUP_RECONCILER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED": "[]",
}
SERVER_PROCESS = "kernelsweep.flows.server_process"  # Prefect's command line, run as `-m`, with the fix
_SERVER_START = ("server", "start")
_PREFECT_CLIS = ("prefect", SERVER_PROCESS)  # what `server start` follows in a server's command line
# How every server kernelsweep starts records runs (`kernelsweep server`, the run's own server, and
# the fleet server's environment in docs/fleet.md): the task-run recorder and the event persister
# read and write their events in batches (Prefect's defaults: 1, 1, 20, 1) instead of about one
# database transaction per event, and a point's five stage tasks are fifteen such events.
# docs/performance.md has the server CPU both ways, docs/reliability.md what a server killed
# mid-batch loses. A value in the environment overrides each.
BATCHED_RECORDING_SETTINGS = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "100",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_READ_BATCH_SIZE": "100",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_READ_BATCH_SIZE": "100",
    # A batch waits at most this long (Prefect: 5 s): the UI shows a task run's state within a second,
    # and a server killed outright loses at most about a second of what the clients already handed it.
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL": "1",
}
# The one services process of a scaled-out server (docs/fleet.md), beside API processes that share
# its PostgreSQL and Redis:
# - It serves no websocket, so it has no subscriber for the event and log distributors that `prefect
#   server services start` runs with every other service (Prefect 3.9.1): each would read every event
#   (and log) from the broker for nobody. The API processes run their own.
# - The triggers keep their causal ordering (which event waits for which) in memory, as in a server of
#   one process: Prefect's Redis ordering exists for several services processes sharing the triggers'
#   work, and costs about eleven Redis calls an event (165 of a sweep point's 275). Run several
#   services processes and this must be `prefect_redis.ordering` again.
# - The triggers read events from Redis 100 at a time (Prefect: 1), as the recorder and persister
#   do (BATCHED_RECORDING_SETTINGS): one read, one claim check and one acknowledgement per batch, not
#   per event. Redis holds a batch until it is acknowledged, so a process killed mid-batch has it
#   delivered again: nothing read is lost, and what was evaluated is evaluated again (docs/fleet.md).
# - The events it publishes (the automations' own) are checked for duplicates in memory: it is the
#   only publisher of them.
# Measured in docs/fleet.md ("One services process"): 55 ms of server CPU per point down to 38 at 100
# hosts' worth (34-35 with hiredis, which the server-redis extra brings).
SERVICES_PROCESS_SETTINGS = {
    "PREFECT_SERVER_EVENTS_STREAM_OUT_ENABLED": "false",
    "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "false",
    "PREFECT_SERVER_EVENTS_CAUSAL_ORDERING": "prefect.server.events.ordering.memory",
    "PREFECT_SERVER_SERVICES_TRIGGERS_READ_BATCH_SIZE": "100",
    "PREFECT_MESSAGING_CACHE": "prefect.server.utilities.messaging.memory",
}
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b: ")  # a traceback's last line
# Between the launcher's start and the server's: argv[1] is the caller's pid, argv[2:] the server's argv.
_DIE_WITH_CALLER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)  # the caller died before the signal was armed\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


class ServerStartError(KernelsweepError):
    """A Prefect server exited or stayed silent while starting; `stderr_tail` holds its log's end."""


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on now (the OS's pick); the server binds it a moment later."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_free(host: str, port: int) -> bool:
    """Nothing listens on host:port now (checked before a fixed port is offered to a server)."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def api_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/api"


def api_healthy(url: str, timeout_seconds: float = 5.0) -> bool:
    """A Prefect API answers its health check (a server still starting, or gone, does not)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_seconds) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


RETRIED_STATUSES = frozenset({429, 502, 503})  # what Prefect's own client retries (a locked SQLite is a 503)
API_RETRIES = 5  # PREFECT_CLIENT_MAX_RETRIES' default


def api_call(
    url: str,
    path: str,
    body: object = None,
    *,
    method: str | None = None,
    timeout_seconds: float = 30.0,
    refused: Callable[[int], None] | None = None,
) -> object:
    """One REST call to a started server (POST `body`, GET without one, or `method`), its decoded JSON
    answer. A status Prefect's client retries is tried again as that client does, up to API_RETRIES times
    with a doubling pause; `refused(status)` hears each of those answers (a benchmark counts them)."""
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(API_RETRIES + 1):
        request = urllib.request.Request(
            f"{url}{path}", data=data, headers={"Content-Type": "application/json"}, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_seconds) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            if error.code not in RETRIED_STATUSES or attempt == API_RETRIES:
                raise
            if refused is not None:
                refused(error.code)
        time.sleep(2**attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


def server_argv(host: str, port: int, *, ui: bool = True, workers: int = 1, services: bool = True) -> list[str]:
    """`prefect server start` as this interpreter runs it, the working folder off its import path.
    `workers` > 1: that many API processes on the one address, which Prefect runs without background
    services; `services=False` says so for one (Prefect's multi-server setup: PostgreSQL and Redis,
    the services started apart by `launch_services`)."""
    return [
        *(sys.executable, "-P", "-m", SERVER_PROCESS, *_SERVER_START),
        *("--host", host, "--port", str(port), "--analytics-off"),
        "--ui" if ui else "--no-ui",
        *(("--workers", str(workers)) if workers > 1 else ()),
        *(() if services else ("--no-services",)),
    ]


def launch(
    host: str,
    port: int,
    env: Mapping[str, str],
    log: Path | IO[bytes],
    *,
    ui: bool = True,
    workers: int = 1,
    services: bool = True,
    dies_with_caller: bool = False,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start `prefect server start` on host:port in its own session, its output appended to `log` (a
    path, or an open binary file); returns at once (see `wait_healthy`). `env` is the server's whole
    environment; a PREFECT_API_URL in it is dropped (the server *is* the API; a client setting
    pointing elsewhere must not reach it). `cwd`: see the module's docstring; never the user's."""
    argv = server_argv(host, port, ui=ui, workers=workers, services=services)
    if dies_with_caller:
        argv = dying_with_caller(argv)
    return _start(argv, env, log, cwd)


def launch_services(env: Mapping[str, str], log: Path, *, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """`prefect server services start`: Prefect's background services (event persister, task-run
    recorder, triggers, ...) in a process of their own, beside API processes started with `workers`
    > 1 on the same PostgreSQL and Redis, with `SERVICES_PROCESS_SETTINGS` where `env` does not set
    them. Started exactly as a server is; stop it with `terminate_tree`."""
    argv = [sys.executable, "-P", "-m", SERVER_PROCESS, "server", "services", "start"]
    return _start(argv, {**SERVICES_PROCESS_SETTINGS, **env}, log, cwd)


def _start(argv: list[str], env: Mapping[str, str], log: Path | IO[bytes], cwd: Path | None) -> subprocess.Popen[bytes]:
    server_env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"} | {"PYTHONSAFEPATH": "1"}
    if server_env.get("PREFECT_HOME"):
        server_env["PREFECT_HOME"] = str(Path(server_env["PREFECT_HOME"]).expanduser().absolute())
    if isinstance(log, Path):
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as handle:
            return _popen(argv, server_env, handle, cwd)
    return _popen(argv, server_env, log, cwd)


def _popen(argv: list[str], env: dict[str, str], log: IO[bytes], cwd: Path | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        env=env,
        cwd=cwd or NEUTRAL_FOLDER,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def dying_with_caller(argv: Sequence[str]) -> list[str]:
    """`argv` (its first item a path) run so that it gets SIGTERM when the calling thread ends, the
    caller's death included (SIGKILL, a crash), and never starts if the caller is already gone."""
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_CALLER, str(os.getpid()), *argv]


def wait_healthy(
    process: subprocess.Popen[bytes],
    url: str,
    *,
    log: Path | IO[bytes],
    timeout_seconds: float = START_TIMEOUT_SECONDS,
) -> None:
    """Return once the server at `url` answers; if it exits first, or stays silent `timeout_seconds`
    (then it is stopped), raise `ServerStartError` with the end of its log."""
    deadline = time.monotonic() + timeout_seconds
    while not api_healthy(url):
        if process.poll() is not None:
            raise _start_error(f"the Prefect server exited during start-up (exit {process.returncode})", process, log)
        if time.monotonic() > deadline:
            terminate_tree(process)
            raise _start_error(f"the Prefect server did not answer within {timeout_seconds:.0f} s", process, log)
        time.sleep(_POLL_SECONDS)


def _start_error(what: str, process: subprocess.Popen[bytes], log: Path | IO[bytes]) -> ServerStartError:
    tail = _log_tail(log)
    where = f"; see {log}" if isinstance(log, Path) else ""
    return ServerStartError(
        f"{what}: {_reason(tail)}{where}",
        argv=[str(a) for a in process.args] if isinstance(process.args, list) else None,
        returncode=process.returncode,
        stderr_tail=tail,
    )


def _reason(log_tail: str) -> str:
    """The line of a server's log that says why it stopped: a traceback's last line (Prefect prints
    "Server stopped!" and uvicorn "Application startup failed" after it), else the last line."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    errors = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return errors[-1] if errors else lines[-1] if lines else "no output"


def _log_tail(log: Path | IO[bytes], size_bytes: int = 4000) -> str:
    try:
        if isinstance(log, Path):
            data = log.read_bytes()[-size_bytes:]
        else:
            log.flush()
            data = os.pread(log.fileno(), size_bytes, max(0, os.fstat(log.fileno()).st_size - size_bytes))
    except OSError:
        return ""
    return data.decode(errors="replace")


def terminate_tree(process: int | subprocess.Popen[bytes], *, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """Stop a process (a pid, or this process's own child) and everything it started, wherever they
    run (a worker's flow runs live in sessions of their own): SIGTERM to all, SIGKILL to what is
    left after `grace_seconds` (at once when 0). Returns when all of them are gone, reaped if ours.

    The tree is read before the first signal and added to, not read afresh: a process whose parent
    exits is reparented away from `process`, and a flow run hung in its SIGTERM handler under a worker
    that had already exited was once left running for good."""
    pid = process if isinstance(process, int) else process.pid
    if not _running(process):
        return  # gone (and, if ours, reaped): its pid may be another process's by now
    tree = {other: _started(other) for other in descendants(pid)}
    for sig, wait_seconds in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, STOP_GRACE_SECONDS)):
        if sig == signal.SIGTERM and grace_seconds <= 0:
            continue
        tree |= {other: _started(other) for other in descendants(pid) if other not in tree}
        left = [other for other, started in tree.items() if started is not None and _started(other) == started]
        for target in [pid, *left]:
            with suppress(ProcessLookupError):
                os.kill(target, sig)
        with suppress(ProcessLookupError):
            os.killpg(pid, sig)  # its session's group too, when it leads one (orphans stay in it)
        deadline = time.monotonic() + wait_seconds
        while _running(process) or any(_running(other) and _started(other) == tree[other] for other in left):
            if time.monotonic() > deadline:
                break
            time.sleep(_POLL_SECONDS)
        else:
            return


def _started(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot), None once it has exited: with its pid, what tells
    a process from a later one that was given the same pid."""
    try:
        return _stat_fields(pid)[19]
    except (OSError, IndexError):
        return None


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            ppid = parent_of(int(entry.name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def parent_of(pid: int) -> int | None:
    """The process id of `pid`'s parent; None when `pid` is gone."""
    try:
        return int(_stat_fields(pid)[1])
    except (OSError, IndexError, ValueError):
        return None


def is_prefect_server(pid: int) -> bool:
    """`pid` runs (or is about to exec) `prefect server start`, by Prefect's command or through
    SERVER_PROCESS: a recorded pid that the OS gave to another program since is not ours to stop."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    argv = [Path(arg.decode(errors="replace")).name for arg in cmdline.split(b"\0")]
    n = len(_SERVER_START)
    return any(
        argv[i] in _PREFECT_CLIS and tuple(argv[i + 1 : i + 1 + n]) == _SERVER_START for i in range(len(argv) - n)
    )


def _running(process: int | subprocess.Popen[bytes]) -> bool:
    if not isinstance(process, int):
        return process.poll() is None  # reaps it
    pid = process
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        return finished == 0
    except ChildProcessError:  # not our child (another shell's `kernelsweep server start`)
        try:
            return _stat_fields(pid)[0] != "Z"
        except (OSError, IndexError):
            return False


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: state, ppid, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


@contextmanager
def serving(
    port: int,
    env: Mapping[str, str],
    log: Path | IO[bytes],
    *,
    host: str = LOOPBACK,
    ui: bool = True,
    workers: int = 1,
    services: bool = True,
    dies_with_caller: bool = False,
    cwd: Path | None = None,
    start_timeout_seconds: float = START_TIMEOUT_SECONDS,
    stop_grace_seconds: float = STOP_GRACE_SECONDS,
) -> Iterator[subprocess.Popen[bytes]]:
    """A server answering at `api_url(host, port)` for the body of the `with`, stopped (with
    everything it started) when the body ends, however it ends."""
    process = launch(
        host, port, env, log, ui=ui, workers=workers, services=services, dies_with_caller=dies_with_caller, cwd=cwd
    )
    try:
        wait_healthy(process, api_url(host, port), log=log, timeout_seconds=start_timeout_seconds)
        yield process
    finally:
        terminate_tree(process, grace_seconds=stop_grace_seconds)
