"""The client side of a prefork server (kernelsweep.toolchain.prefork_server): ask it for a forked copy
of a process that already imported what an entry point needs, then be that process to whoever
started this one (same exit code, or killed by the same signal; SIGTERM and SIGINT passed on).

It runs before any of kernelsweep's imports can be paid for, so it imports only modules built into
the interpreter (`_socket`, `_signal`, `marshal`, `array`: `socket`, `signal` and `json` would each
cost more than the rest of its start). Run by path as `python -I -S prefork_client.py MODULE ARGS...`
it is the simulated tools' command (TEMPLATE_ENV names the run's template server): about 15 ms of
CPU against 50-250 ms for an interpreter that imports the tool's modules and numpy itself. Without a
server it execs `python -P -m MODULE ARGS...`, exactly the command it stands for.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's C half: no stub, no enum import
import _socket
import array
import marshal
import os
import sys

TYPE_CHECKING = False  # typing's own flag would cost its import
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import NoReturn

TEMPLATE_ENV = "KERNELSWEEP_TOOL_TEMPLATE"  # the socket of the run's template server (kernelsweep.sim.template)
PARENT_ENV = "KERNELSWEEP_TOOL_PARENT"  # the pid of the run that started a tool (parent_death); here, as
# this file imports nothing of kernelsweep's
RELAYED = (_signal.SIGTERM, _signal.SIGINT)
STREAMS = 3  # stdin, stdout, stderr, passed as file descriptors
NUMBER = 8  # bytes of a length, a process id or a wait status on the wire


def forked_argv(env: Mapping[str, str], python: str, module: str, *args: str) -> list[str] | None:
    """The command for kernelsweep's own entry point `module` (run as `-m`) forked from the run's template,
    when the run has one (`env`) and the entry point is to run under kernelsweep's own Python; else None."""
    if TEMPLATE_ENV not in env or os.path.abspath(python) != os.path.abspath(sys.executable):
        return None
    return [sys.executable, "-I", "-S", __file__, module, *args]


def entry_point(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """The module and arguments of a command that runs a module as `-m` does: a `forked_argv` command,
    or `python -P -m MODULE ARGS`; None for any other command."""
    if forked(argv):
        return argv[4], list(argv[5:])
    if list(argv[1:3]) == ["-P", "-m"] and len(argv) > 3:
        return argv[3], list(argv[4:])
    return None


def forked(argv: Sequence[str]) -> bool:
    """Whether argv is a `forked_argv` command (which arms the parent-death signal for itself)."""
    return list(argv[1:4]) == ["-I", "-S", __file__] and len(argv) > 4


def send_request(
    conn: _socket.socket, streams: Sequence[int], cwd: str, env: Mapping[str, str], argv: Sequence[str]
) -> None:
    body = marshal.dumps((cwd, dict(env), list(argv)))
    fds = array.array("i", streams)
    conn.sendmsg([len(body).to_bytes(NUMBER, "big")], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds.tobytes())])
    conn.sendall(body)


def receive_number(conn: _socket.socket) -> int | None:
    """The next number the server sends; None when it closed the connection first."""
    chunks = b""
    while len(chunks) < NUMBER:
        chunk = conn.recv(NUMBER - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return int.from_bytes(chunks, "big", signed=True)


def unix_address(address: str) -> str:
    """A socket's path, or for `@name` the name in Linux's abstract namespace (no file to leave behind
    when its server is killed, no folder, no path length limit from a long TMPDIR)."""
    return "\0" + address[1:] if address.startswith("@") else address


def fork_from_server(address: str, argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, _socket.socket] | None:
    """The process id the server at `address` forked for `argv` with this process's streams and folder,
    and the connection it will send its wait status on; None if no server answers there."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(unix_address(address))
        send_request(conn, [0, 1, 2], os.getcwd(), env, argv)
        pid = receive_number(conn)
    except OSError:
        pid = None
    if pid is None:
        conn.close()
        return None
    return pid, conn


def end_as_forked(pid: int, conn: _socket.socket) -> NoReturn:
    """Pass SIGTERM and SIGINT on to `pid` until it ends, then end as it ended."""
    for number in RELAYED:
        _signal.signal(number, lambda signum, _: _relay(pid, signum))
    status = receive_number(conn)
    if status is None:  # the server is gone: nothing will say how the process ended
        sys.exit(f"the prefork server stopped while process {pid} ran")
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: end the same way (a worker, a timeout, reads it so)
        if -code in RELAYED:  # handled here; others cannot have been (SIGKILL) or were never touched
            _signal.signal(-code, _signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal that does not end a process by default
    sys.exit(code)


def _relay(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def _die_with_run(parent: str | None) -> None:
    """parent_death.arm for this client: the parent-death signal, armed here, reaches this process only;
    the server kills the forked process when this one's connection closes."""
    if parent is None or sys.platform != "linux":
        return
    import ctypes

    ctypes.CDLL(None).prctl(1, _signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(parent):
        sys.exit(1)  # the run died before the signal was armed


def main() -> None:
    module, *args = sys.argv[1:]
    env = dict(os.environ)
    _die_with_run(env.pop(PARENT_ENV, None))
    path = env.pop(TEMPLATE_ENV, None)
    started = fork_from_server(path, [module, *args], env) if path else None
    if started is None:  # no template (stopped, or never started): the entry point runs here, as before
        os.execv(sys.executable, [sys.executable, "-P", "-m", module, *args])
    end_as_forked(*started)


if __name__ == "__main__":
    main()
