"""A click group whose commands are imported when one runs (or when help lists them).

A command's module may pull in pyarrow datasets, scipy or Prefect; a host that only starts its worker
(`kernelsweep fleet worker`, what every fleet host's unit runs) or validates a spec should not pay
seconds of imports for commands it never calls.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import click


class LazyGroup(click.Group):
    """`modules` maps each command name to its module under kernelsweep.flows.cli, which defines a
    click command of that name."""

    modules: Mapping[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.modules)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = self.modules.get(cmd_name)
        if module is None:
            return None
        command = getattr(importlib.import_module(f"kernelsweep.flows.cli.{module}"), cmd_name)
        return command if isinstance(command, click.Command) else None
