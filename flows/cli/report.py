"""`kernelsweep report`: the latest result per point, failures, regressions with their causes, the
cross-platform view, and with --html the self-contained HTML report with its charts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from kernelsweep.flows.cli.output import EXIT_PROBLEMS, out
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.report.load import Selection
from kernelsweep.report.stats import DEFAULT_ALPHA
from kernelsweep.report.summary import Cell, Report

_DATE = click.DateTime(formats=["%Y-%m-%d"])


def selection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that choose rows, shared by report and compare."""
    options = [
        click.option("--results", "results_uri", default="results", show_default=True, help="Results folder or s3://."),
        click.option("--kernel", "kernels", multiple=True, help="Only this kernel (repeat for more)."),
        click.option("--platform", "platforms", multiple=True, type=click.Choice(PLATFORM_NAMES), help="Only these."),
        click.option("--dtype", "dtypes", multiple=True, help="Only this dtype (repeat for more)."),
        click.option("--sweep", "sweeps", multiple=True, help="Only rows of this sweep name (repeat for more)."),
        click.option("--since", type=_DATE, help="Only runs dated on or after YYYY-MM-DD (UTC)."),
        click.option("--until", type=_DATE, help="Only runs dated on or before YYYY-MM-DD (UTC)."),
        click.option("--days", type=click.IntRange(min=1), help="Only runs of the last N days, today included."),
        click.option(
            "--alpha",
            type=click.FloatRange(0, 1, min_open=True, max_open=True),
            default=DEFAULT_ALPHA,
            show_default=True,
            help="Family-wise false-alarm rate of the verdicts (docs/reports.md).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def selection_from(
    kernels: tuple[str, ...],
    platforms: tuple[str, ...],
    dtypes: tuple[str, ...],
    sweeps: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    days: int | None,
) -> Selection:
    return Selection(
        kernels=kernels,
        platforms=platforms,
        dtypes=dtypes,
        sweeps=sweeps,
        since=since.date() if since else None,
        until=until.date() if until else None,
        days=days,
    )


@click.command()
@selection_options
@click.option(
    "--html",
    "html_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write the HTML report (index.html, charts embedded) and its PNG charts to this folder.",
)
def report(results_uri: str, alpha: float, html_dir: Path | None, **filters: Any) -> None:
    """Summarise the results: latest result per point, failed points, regressions and their causes.

    Exit code 0 when every point's latest run succeeded and no series has an open regression, 1 when
    some did not or has one, 2 on bad input, 3 when the results cannot be read.
    """
    from kernelsweep.report.summary import build_report

    built = build_report(results_uri, selection_from(**filters), alpha)
    if html_dir is not None:
        from kernelsweep.report.html import bundle
        from kernelsweep.report.publish import write_bundle

        page = write_bundle(bundle(built), str(html_dir))
    render(built)
    if html_dir is not None:
        out.print(f"HTML report: {page}", highlight=False, soft_wrap=True)
    if built.failed or built.open_regressions:
        sys.exit(EXIT_PROBLEMS)


def render(built: Report) -> None:
    simulated = " (simulated)" if built.is_simulation else ""
    out.print(_table(f"Latest result per point{simulated}", _latest(built)))
    if built.failed:
        out.print(_table("Failed points (latest run)", built.failure_rows(), drop=("flow_run_id",)))
    regressions = built.regression_rows()
    title = f"Regressions: {len(regressions)} step(s) slower" if regressions else "Regressions: none"
    out.print(_table(title, regressions, drop=("flow_run_id", "p_value")) if regressions else title, highlight=False)
    if len(built.platforms) > 1:
        out.print(_table("Across platforms: latency (us) and % of each platform's peak", built.cross_rows()))


def _latest(built: Report) -> list[dict[str, Cell]]:
    rows = []
    for row in built.summary_rows():
        spread = row["spread_percent"]
        rows.append(
            {
                "kernel": row["kernel"],
                "shape": row["shape"],
                "dtype": row["dtype"],
                "platform": row["platform"],
                "status": row["status"],
                "median us": row["median_us"],
                "± (half range)": None if spread is None else f"{float(spread) / 2:.1f}%",
                "n": row["repeats"],
                "TFLOPS": row["tflops"],
                "MFU %": row["mfu_percent"],
                "% roofline": row["roofline_percent"],
                "correct": row["correct"],
            }
        )
    return rows


def _table(title: str, rows: list[dict[str, Cell]], drop: tuple[str, ...] = ()) -> Table:
    table = Table(title=title, title_justify="left")
    columns = [c for c in rows[0] if c not in drop] if rows else []
    for column in columns:
        numeric = any(isinstance(r[column], int | float) and not isinstance(r[column], bool) for r in rows)
        table.add_column(column, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(_cell(row[c]) for c in columns))
    return table


def _cell(value: Cell) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "[red]NO[/red]"
    if value == "failed":
        return "[red]failed[/red]"
    return escape(str(value))  # error messages hold [NCC_...] codes that are not markup
