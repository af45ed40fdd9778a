"""A prefork server: one process that imports what an entry point needs once, then forks a copy of
itself for each request a command (kernelsweep.toolchain.prefork_client) sends, and that copy becomes
the process the command stands for: its standard streams, folder, environment and arguments.

Why: an entry point that imports Prefect's engine, or numpy and a simulated tool, spends most of its
CPU starting; a forked copy of a process that holds the modules starts in a millisecond. The fleet
hosts fork their flow runs this way (kernelsweep.flows.fleet.prefork), a simulated run its tools
(kernelsweep.sim.template).

The server stays single-threaded (a fork copies only the thread that forks, so a lock another thread
held would stay held in the child forever): one select loop over the listening socket, the open
requests and a SIGCHLD wake-up pipe. It imports the modules at the first request, so a server that
forks nothing costs nothing more. It sends each command its process's id, then the process's wait
status when it ends, and kills the process (its session) if the command goes away first (killed by a
timeout or with its run). It stops listening on SIGTERM or when the process that started it ends,
then waits for the processes it forked and returns.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import random
import selectors
import signal
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.toolchain.prefork_client import NUMBER, STREAMS, unix_address
from kernelsweep.toolchain.preload import import_and_freeze

OWNER_CHECK_SECONDS = 1.0  # how often the server looks whether the process that started it still runs


@dataclass
class Request:
    """What a command sends: its streams, and what its process would have had."""

    streams: list[int]
    cwd: str
    env: dict[str, str]
    argv: list[str]


def _receive_request(conn: socket.socket) -> Request:
    head, fds, _, _ = socket.recv_fds(conn, NUMBER, STREAMS)
    head += _exactly(conn, NUMBER - len(head))
    if len(fds) != STREAMS:
        for fd in fds:
            os.close(fd)
        raise ConnectionError(f"expected {STREAMS} streams, got {len(fds)}")
    try:
        cwd, env, argv = marshal.loads(_exactly(conn, int.from_bytes(head, "big")))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return Request(fds, cwd, env, argv)


def _same_user(conn: socket.socket) -> None:
    """Refuse (ConnectionError) a command another user's process sent: the kernel's word, not its own."""
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if uid != os.geteuid():
        raise ConnectionError(f"a request from user {uid}")


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = conn.recv(size)
        if not chunk:
            raise ConnectionError("the command closed its connection mid-request")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _send_number(conn: socket.socket, value: int) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(value.to_bytes(NUMBER, "big", signed=True))


def listen(address: str) -> socket.socket:
    """The server's socket, listening at `address` (a path, or `@name` in Linux's abstract namespace):
    made by whoever starts the server when its commands may come before the server's own start is
    through (they would find nothing there and run alone)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(unix_address(address))
    listener.listen(64)
    return listener


def serve(listener: socket.socket, address: str, preload: Sequence[str], owner: int) -> Request | None:
    """Answer requests on `listener` (at `address`) until told to stop, or until `owner` (the process
    that started this one) is no longer its parent; returns None then, or, in a forked child, the
    request it is to become (`become`). The owner is named, not read here: a starter that died before
    this process got here (a host killed during a template's preload) left it reparented, and a
    parent read then would have been the reaper, which never ends: the server served on for ever.
    Only this user's processes are answered: an abstract address, unlike a file in a private folder,
    is open to every user of the host."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    stopping: list[int] = []
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up pipe hears of each child
    signal.signal(signal.SIGTERM, lambda number, _: stopping.append(number))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is its owner's to act on
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    loaded = False
    while True:
        if (stopping or os.getppid() != owner) and listener.fileno() >= 0:
            selector.unregister(listener)
            listener.close()
            if not address.startswith("@"):
                Path(address).unlink(missing_ok=True)
        if listener.fileno() < 0 and not children:
            return None
        for key, _ in selector.select(OWNER_CHECK_SECONDS):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    _same_user(conn)
                    request = _receive_request(conn)
                except (OSError, ValueError, EOFError, TypeError):
                    conn.close()
                    continue
                if not loaded:
                    import_and_freeze(preload)  # each child's collections walk none of it again
                    loaded = True
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    for number in (signal.SIGCHLD, signal.SIGTERM):
                        signal.signal(number, signal.SIG_DFL)
                    signal.signal(signal.SIGINT, signal.default_int_handler)
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
                _send_number(conn, pid)
            elif key.fileobj == wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
                _reap(children, selector)
            else:  # the command went away (killed outright): its process goes too
                _kill(key.data)
                selector.unregister(key.fileobj)


def _kill(pid: int) -> None:
    """SIGKILL the forked process's session (it leads one), or the process if it has not made it yet."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


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
        _send_number(conn, status)
        conn.close()


def become(request: Request) -> None:
    """Take the command's streams, a session of its own (as a process started with one), its folder
    and environment (with what the standard library had read of the server's: TMPDIR, TZ), and fresh
    random numbers (a fork copies the server's generator)."""
    for target, fd in enumerate(request.streams):
        os.dup2(fd, target)
        os.close(fd)
    os.setsid()
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    tempfile.tempdir = None
    time.tzset()
    random.seed()
