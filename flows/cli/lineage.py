from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command()
@click.argument("row_id", metavar="ROW_ID")
@click.option("--results", "results_uri", required=True, help="Results folder or s3://bucket/prefix holding the row.")
@click.option(
    "--dest",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the fetched artifacts [./lineage-ROW_ID].",
)
def lineage(row_id: str, results_uri: str, dest: Path | None) -> None:
    """Fetch every artifact a result row links and verify each one's sha256.

    Exit code 0 when all verify, 1 when any is missing or corrupt, 2 when there is no such row,
    3 when the results cannot be read at all.
    """
    from kernelsweep.results.verify import default_dest, render, verify_row

    report = verify_row(results_uri, row_id, dest or default_dest(row_id))
    click.echo(render(report))  # plain: artifact names hold [brackets] that rich would take as markup
    source = next((a.path for a in report.artifacts if a.name == "nki_source" and a.ok and a.path), None)
    if report.hotspots and source is not None:
        from kernelsweep.hotspots import render_text

        click.echo("\n" + render_text(source.read_text(errors="replace"), report.hotspots, report.hotspots[0]["file"]))
    elif report.hotspots_note:
        click.echo("\n" + report.hotspots_note)
    sys.exit(0 if report.ok else 1)
