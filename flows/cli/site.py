"""`kernelsweep site`: build the static results site (docs/site.md), or show a built one over HTTP."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.markup import escape

from kernelsweep.errors import UsageError
from kernelsweep.flows.cli.output import console


@click.command()
@click.argument("results_uri", required=False)
@click.option("--out", help="Folder or s3:// prefix to write the site to (default: RESULTS/site).")
@click.option(
    "--acknowledged",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML file of accepted steps: shown as acknowledged, with their reason (docs/reports.md).",
)
@click.option(
    "--prefect-ui",
    default=lambda: os.environ.get("PREFECT_UI_URL"),
    help="The Prefect UI's URL, for each point's flow run link (default: $PREFECT_UI_URL).",
)
@click.option("--serve", "serve_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Serve this built site folder on localhost instead of building (Ctrl-C stops).")  # fmt: skip
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="With --serve.")
def site(
    results_uri: str | None,
    out: str | None,
    acknowledged: Path | None,
    prefect_ui: str | None,
    serve_dir: Path | None,
    port: int,
) -> None:
    """Build the results site of RESULTS (a folder or s3://): an overview, a page per kernel with every
    series' history, a compare view and each point's lineage; only kernels whose rows changed are
    rebuilt. Static: it opens from a folder with no server and no internet.
    """
    if serve_dir is not None:
        from kernelsweep.site.serve import serve

        serve(serve_dir, port)
        return
    if not results_uri:
        raise UsageError("give the results to build the site of (kernelsweep site RESULTS), or --serve DIR")
    from kernelsweep.report.acknowledge import load_acknowledged
    from kernelsweep.site import build_site

    accepted = load_acknowledged(acknowledged) if acknowledged else []
    built = build_site(results_uri, out, acknowledged=accepted, prefect_ui=prefect_ui or None)
    console.print(
        f"site: {escape(built.location)} ({len(built.rebuilt)} kernel(s) rebuilt, {len(built.kept)} unchanged)",
        highlight=False,
        soft_wrap=True,
    )
