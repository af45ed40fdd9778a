"""The fleet pools' flow-run command (`python -m kernelsweep.flows.fleet.engine`): Prefect's engine,
forked from this host's prefork server (kernelsweep.flows.fleet.prefork) when the worker started one,
else `python -m prefect.engine` in this process.

To the worker this command is the flow run's process: its pid is the one Prefect signals, and it
ends as the engine ended (the same exit code, or killed by the same signal). It passes on the
signals a worker sends to cancel or stop a run (SIGTERM, SIGINT) and, if it is killed outright, the
server kills the engine. It imports only the standard library, so it starts in a few milliseconds.
"""

from __future__ import annotations

import os
import sys

from kernelsweep.toolchain.prefork_client import end_as_forked, fork_from_server

SOCKET_ENV = "KERNELSWEEP_PREFORK_SOCKET"  # set by `kernelsweep fleet worker` for its flow runs


def main() -> None:
    env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
    path = os.environ.get(SOCKET_ENV)
    started = fork_from_server(path, sys.argv[1:], env) if path else None
    if started is None:  # no server (it died, is stopping, or this worker never started one): the engine runs here
        os.execv(sys.executable, [sys.executable, "-m", "prefect.engine", *sys.argv[1:]])
    end_as_forked(*started)


if __name__ == "__main__":
    main()
