"""`kernelsweep compact RESULTS`: each partition's objects as one (kernelsweep.results.compact says how it
stays safe to stop and to run again). The nightly fleet run does the same for the nights before its own."""

from __future__ import annotations

from datetime import UTC, date, datetime

import click

from kernelsweep.flows.cli.output import console, out


@click.command()
@click.argument("results_uri", metavar="RESULTS")
@click.option(
    "--before",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Only partitions dated before this day (YYYY-MM-DD) [today, UTC: tonight's runs may still write].",
)
def compact(results_uri: str, before: datetime | None) -> None:
    """Rewrite each partition's small Parquet objects as one; row ids stay, readers never see a half state."""
    from kernelsweep.results.compact import compact as compact_results

    until: date = before.date() if before else datetime.now(UTC).date()
    done = compact_results(results_uri, before=until)
    for part in done:
        out.print(f"{part.partition}: {part.replaced} objects -> 1 ({part.rows} rows)", highlight=False)
    replaced = sum(part.replaced for part in done)
    console.print(f"compacted {len(done)} partitions dated before {until} ({replaced} objects)", highlight=False)
