from __future__ import annotations

import json
from pathlib import Path

import click

from kernelsweep.flows.cli.output import out


@click.command()
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "--format", "profile_format", type=click.Choice(["json", "summary-json", "parquet"]), help="Default: detected."
)
def extract(profile: Path, profile_format: str | None) -> None:
    """Print the normalised metrics of a profile file as JSON."""
    from kernelsweep.errors import ExtractError, UsageError
    from kernelsweep.profiles import read_profile

    try:
        metrics = read_profile(profile, profile_format)
    except ExtractError as exc:  # a file that is not a readable profile is the user's input
        raise UsageError(exc.message) from None
    out.print_json(json.dumps(metrics.as_dict()))
