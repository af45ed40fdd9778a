from __future__ import annotations

import sys

import click


@click.command()
def doctor() -> None:
    """Show which Neuron tools, devices and packages this host has, and the fix for what is missing.

    Exit code 0 when the real toolchain is complete, 1 when sweeps here will run on the simulator.
    """
    from kernelsweep.doctor import Host, report
    from kernelsweep.flows.settings import tool_paths_from_env

    text, code = report(Host(extra_paths=tool_paths_from_env()))
    click.echo(text)  # plain: the report may hold [brackets] that rich would take as markup
    sys.exit(code)
