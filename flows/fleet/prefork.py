"""A host's prefork server: one process that imports Prefect's engine and the shard flow once, then
forks a flow-run process for each flow run its worker starts (`kernelsweep.flows.fleet.engine`).

Why: a flow-run process spent about 2 CPU-seconds importing Prefect and the flow before its first
point, on every shard, compile shard and fleet run; a forked copy of a process that already holds the
modules starts in milliseconds. `kernelsweep fleet worker` starts the server beside the worker, as
the worker's child, so a host that dies takes its flow runs with it as before. The imports happen at
the first flow run, not at the worker's start: a host that runs no flow run costs nothing more.

The server stays single-threaded (a fork copies only the thread that forks, so a lock another thread
held would stay held in the child forever): one select loop over the listening socket, the open
requests and a SIGCHLD wake-up pipe. Each forked process gets the requesting command's standard
streams, working folder, environment and arguments, starts a session of its own as a worker's flow
run does, re-reads Prefect's settings and logging from that environment, and runs `prefect.engine`
as `python -m prefect.engine` runs it. The server sends the command the process id, then its wait
status when it ends; it kills the process if the command goes away first (its worker killed it).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.toolchain.parent_death import signal_on_parent_death

# What every flow run imports; the worker names the flow its pool's runs mostly are (`flow_module`).
ENGINE_MODULES = ("prefect.engine", "prefect.flow_engine")
STREAMS = 3  # stdin, stdout, stderr, passed as file descriptors
LENGTH = struct.Struct("!Q")


@dataclass
class Request:
    """What the engine command sends: its streams, and what its process would have had."""

    streams: list[int]
    cwd: str
    env: dict[str, str]
    argv: list[str]


def send_request(conn: socket.socket, request: Request) -> None:
    body = json.dumps({"cwd": request.cwd, "env": request.env, "argv": request.argv}).encode()
    socket.send_fds(conn, [LENGTH.pack(len(body))], request.streams)
    conn.sendall(body)


def _receive_request(conn: socket.socket) -> Request:
    head, fds, _, _ = socket.recv_fds(conn, LENGTH.size, STREAMS)
    head += _exactly(conn, LENGTH.size - len(head))
    fields = json.loads(_exactly(conn, LENGTH.unpack(head)[0]))
    if len(fds) != STREAMS:
        raise ConnectionError(f"expected {STREAMS} streams, got {len(fds)}")
    return Request(fds, fields["cwd"], fields["env"], fields["argv"])


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = conn.recv(size)
        if not chunk:
            raise ConnectionError("the engine command closed its connection mid-request")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def send_message(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def serve(path: Path, preload: list[str]) -> Request | None:
    """Answer requests until told to stop; returns None then, or, in a forked child, the request it is
    to run. SIGTERM, or the worker's end (the parent-death signal), stops it taking requests; it then
    waits for the flow runs it forked (a worker killed alone leaves them running, and their commands
    wait for word of their end) and stops."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    stopping: list[int] = []
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up pipe hears of each child
    signal.signal(signal.SIGTERM, lambda number, _: stopping.append(number))
    signal_on_parent_death(signal.SIGTERM)  # the worker's end stops it too
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    loaded = False
    while True:
        if stopping and listener.fileno() >= 0:
            selector.unregister(listener)
            listener.close()
            path.unlink(missing_ok=True)
        if stopping and not children:
            return None
        for key, _ in selector.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    request = _receive_request(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                if not loaded:
                    for module in (*ENGINE_MODULES, *preload):
                        importlib.import_module(module)
                    loaded = True
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    for number in (signal.SIGCHLD, signal.SIGTERM):
                        signal.signal(number, signal.SIG_DFL)
                    selector.close()
                    for open_socket in (listener, conn, *children.values()):
                        open_socket.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    return request
                for stream in request.streams:
                    os.close(stream)
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
                with contextlib.suppress(OSError):
                    send_message(conn, {"pid": pid})
            elif key.fileobj == wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
                _reap(children, selector)
            else:  # the engine command went away (killed outright): its engine goes too
                with contextlib.suppress(ProcessLookupError):
                    os.kill(key.data, signal.SIGKILL)
                selector.unregister(key.fileobj)


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(KeyError):
            selector.unregister(conn)
        with contextlib.suppress(OSError):
            send_message(conn, {"status": status})
        conn.close()


def run_engine(request: Request) -> None:
    """Become the process `python -m prefect.engine` would have been, then run it."""
    for target, fd in enumerate(request.streams):
        os.dup2(fd, target)
        os.close(fd)
    os.setsid()
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    import random

    random.seed()  # a fork copies the server's generator: every process would draw the same numbers
    from prefect.context import refresh_global_settings_context
    from prefect.logging.configuration import setup_logging

    refresh_global_settings_context()
    setup_logging(incremental=False)
    import runpy

    sys.argv = [sys.argv[0], *request.argv]
    sys.modules.pop("prefect.engine")  # preloaded for its imports; run afresh as `__main__`, as `-m` runs it
    runpy.run_module("prefect.engine", run_name="__main__", alter_sys=True)


def flow_module(pool: str) -> str:
    """The flow most of a pool's runs are: the fleet runs of the control pool, the compile shards of
    the compile farm's, the shards of a family's."""
    if pool.endswith("-control"):
        return "kernelsweep.flows.fleet.flow"
    return "kernelsweep.flows.compile_shard" if pool.endswith("-compile") else "kernelsweep.flows.sweep"


def main(argv: list[str] | None = None) -> None:
    """`python -m kernelsweep.flows.fleet.prefork SOCKET [MODULE ...]`: serve at SOCKET, importing the
    engine and the MODULEs at the first request."""
    path, *preload = argv if argv is not None else sys.argv[1:]
    request = serve(Path(path), preload)
    if request is None:
        with contextlib.suppress(OSError):
            Path(path).parent.rmdir()  # the worker made the folder for this server alone
        return
    run_engine(request)


if __name__ == "__main__":
    main()
