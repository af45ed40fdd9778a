"""The fleet in the Prefect layer: the fleet flow, its shards on each host, the compile farm's streams,
the wait for workers and shards, the summary, and what `fleet up` installs on the server.

A lazy face: every shard's flow-run process imports `fleet.shard` through this package, and the fleet
flow's own imports (the plan's dataset reads, the farm, the worker types) cost each of them about a CPU
second. Deployments name the flow by its module (`kernelsweep.flows.fleet.flow:fleet`); `fleet` is still
found here, on first use, for deployments made before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.flows.fleet.flow import fleet

__all__ = ["fleet"]
__getattr__ = public_face(__name__, __file__)
