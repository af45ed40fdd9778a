"""`kernelsweep fleet`: the group of the fleet's commands, each imported only when it runs.

`up`, `pause` and `resume` (flows/cli/fleet_up.py) set up the server's pools, deployments, schedule
and automations; `status` reads them; `demo` starts a whole fleet on this machine; `worker` is what
every host's unit runs, and starts in a fraction of the others' imports.
"""

from __future__ import annotations

import click

from kernelsweep.flows.cli.lazy import LazyGroup


class _FleetCommands(LazyGroup):
    modules = {
        "up": "fleet_up",
        "pause": "fleet_up",
        "resume": "fleet_up",
        "status": "fleet_status",
        "demo": "fleet_demo",
        "worker": "fleet_worker",
    }


@click.group(cls=_FleetCommands)
def fleet() -> None:
    """Set up and inspect the fleet: work pools, deployments, workers (against PREFECT_API_URL)."""
