"""The fleet pools' flow-run command (`python -m kernelsweep.flows.fleet.engine`): Prefect's engine,
forked from this host's prefork server (kernelsweep.flows.fleet.prefork) when the worker started one,
else `python -m prefect.engine` in this process.

To the worker this command is the flow run's process: its pid is the one Prefect signals, and it
ends as the engine ended (the same exit code, or killed by the same signal). It passes on the
signals a worker sends to cancel or stop a run (SIGTERM, SIGINT) and, if it is killed outright, the
server kills the engine. It imports only the standard library, so it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from typing import BinaryIO

from kernelsweep.flows.fleet.prefork import Request, send_request

SOCKET_ENV = "KERNELSWEEP_PREFORK_SOCKET"  # set by `kernelsweep fleet worker` for its flow runs
RELAYED = (signal.SIGTERM, signal.SIGINT)


def main() -> None:
    started = _fork_from_server(os.environ.get(SOCKET_ENV))
    if started is None:  # no server (it died, is stopping, or this worker never started one): the engine runs here
        os.execv(sys.executable, [sys.executable, "-m", "prefect.engine", *sys.argv[1:]])
    pid, answers = started
    for sig in RELAYED:
        signal.signal(sig, lambda number, _: _relay(pid, number))
    line = answers.readline()
    if not line:  # the server is gone: nothing will say how the engine ended
        sys.exit(f"the prefork server stopped while flow-run process {pid} ran")
    code = os.waitstatus_to_exitcode(json.loads(line)["status"])
    if code < 0:  # killed by a signal: end the same way, as the worker reads a killed engine's end
        if -code in RELAYED:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def _relay(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def _fork_from_server(path: str | None) -> tuple[int, BinaryIO] | None:
    """The engine's process id, forked by the server at `path`, and where the server will say how it ended."""
    if not path:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
        send_request(conn, Request([0, 1, 2], os.getcwd(), env, sys.argv[1:]))
        answers = conn.makefile("rb")
        started = answers.readline()
    except OSError:
        started = b""
    if not started:
        conn.close()
        return None
    return json.loads(started)["pid"], answers


if __name__ == "__main__":
    main()
