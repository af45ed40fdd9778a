"""The fleet in the Prefect layer: the fleet flow, its shards on each host, the compile farm's streams,
the wait for workers and shards, the summary, and what `fleet up` installs on the server.

The fleet flow is named here because deployments name it by this module (`kernelsweep.flows.fleet:fleet`).
"""

from kernelsweep.flows.fleet.flow import fleet

__all__ = ["fleet"]
