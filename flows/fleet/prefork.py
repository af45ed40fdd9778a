"""A host's prefork server: one process that imports Prefect's engine and the shard flow once, then
forks a flow-run process for each flow run its worker starts (`kernelsweep.flows.fleet.engine`).

Why: a flow-run process spent about 2 CPU-seconds importing Prefect and the flow before its first
point, on every shard, compile shard and fleet run; a forked copy of a process that already holds the
modules starts in milliseconds. `kernelsweep fleet worker` starts the server beside the worker, as
the worker's child, so a host that dies takes its flow runs with it as before. The imports happen at
the first flow run, not at the worker's start: a host that runs no flow run costs nothing more.

Each forked process (kernelsweep.toolchain.prefork_server) re-reads Prefect's settings and logging
from its command's environment and runs `prefect.engine` as `python -m prefect.engine` runs it. The
server stops with its worker, after the flow runs it forked have ended.
"""

from __future__ import annotations

import os
import sys

from kernelsweep.toolchain.prefork_server import Request, become, listen, serve

# What every flow run imports; the worker names the flow its pool's runs mostly are (`flow_module`).
ENGINE_MODULES = ("prefect.engine", "prefect.flow_engine")
# pyarrow imports pandas when it first builds a table from Python objects (a shard's rows, as it stores
# them): 0.24 CPU-s in every forked shard, unless the server holds it already.
STORE_MODULES = ("pandas",)


def run_engine(request: Request) -> None:
    """Become the process `python -m prefect.engine` would have been, then run it."""
    become(request)
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
    """`python -m kernelsweep.flows.fleet.prefork ADDRESS [MODULE ...]`: serve at ADDRESS (a socket
    path, or `@name` in the abstract namespace), importing the engine and the MODULEs at the first request."""
    owner = os.getppid()  # first: the worker that started this server (its imports come at the first request)
    address, *preload = argv if argv is not None else sys.argv[1:]
    request = serve(listen(address), address, [*ENGINE_MODULES, *STORE_MODULES, *preload], owner)
    if request is not None:
        run_engine(request)


if __name__ == "__main__":
    main()
