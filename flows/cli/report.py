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

from kernelsweep.errors import UsageError
from kernelsweep.flows.cli.output import console, out
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.report import Selection, strict_json
from kernelsweep.report.best import Best
from kernelsweep.report.stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD, Rule
from kernelsweep.report.summary import Cell, Report
from kernelsweep.sim import SIM_VERSION_SUFFIX

_DATE = click.DateTime(formats=["%Y-%m-%d"])
TRIAGE_DETAILS = ("acknowledged", "reason", "link", "fixed_by", "triaged_by", "triaged_at")  # in the state cell


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
            type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
            default=DEFAULT_ALPHA,
            show_default=True,
            help="Error level of each verdict; intervals are 1 - 2 alpha (docs/reports.md).",
        ),
        click.option(
            "--threshold",
            "thresholds",
            multiple=True,
            metavar="[KERNEL=]PERCENT",
            help="The smallest change that matters (default 2%); KERNEL=5% for one kernel. Repeatable.",
        ),
        click.option(
            "--correction",
            type=click.Choice(["bh", "holm"]),
            default="bh",
            show_default=True,
            help="Over the points tested: bh (Benjamini-Hochberg, false discovery rate) or holm (any false call).",
        ),
        click.option(
            "--format",
            "output_format",
            type=click.Choice(["table", "json", "markdown"]),
            default="table",
            show_default=True,
            help="table for a terminal, json for machines (docs/*.schema.json), markdown for a PR comment.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def rule_from(alpha: float, thresholds: tuple[str, ...], correction: str) -> Rule:
    """The verdict rule from the CLI's options; a bad threshold is a usage error."""
    default, per_kernel = DEFAULT_THRESHOLD, []
    for given in thresholds:
        kernel, _, value = given.rpartition("=")
        number = _fraction(value, given)
        if kernel:
            per_kernel.append((kernel, number))
        else:
            default = number
    return Rule(
        threshold=default,
        alpha=alpha,
        correction="holm" if correction == "holm" else "bh",
        per_kernel=tuple(per_kernel),
    )


def _fraction(value: str, given: str) -> float:
    text = value.strip()
    try:
        number = float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        number = -1.0
    if not 0 <= number < 1:
        raise UsageError(f"--threshold {given}: give a change like 2% or 0.02 (optionally KERNEL=5%)")
    return number


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
@click.option(
    "--acknowledged",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML file of accepted steps (series, night, reason): they stop failing the report (docs/reports.md).",
)
@click.option("--allow-incorrect", is_flag=True, help="Exit 0 even while a series' latest row is incorrect.")
@click.option(
    "--export-best",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write each shape's best configuration (kernel, shape, tunables, latency, row id) to this file: "
    "TOML for a .toml name, else JSON; the tuned store beside the results takes them too (docs/tuning.md).",
)
def report(
    results_uri: str,
    alpha: float,
    thresholds: tuple[str, ...],
    correction: str,
    output_format: str,
    html_dir: Path | None,
    acknowledged: Path | None,
    allow_incorrect: bool,
    export_best: Path | None,
    **filters: Any,
) -> None:
    """Summarise the results: latest result per point, failed and incorrect points, regressions and
    their causes.

    Exit code 0 when every series' latest run succeeded with a correct output and no series has an
    open regression; 1 otherwise; 2 on bad input; 3 when the results cannot be read.
    """
    from kernelsweep.report import build_report
    from kernelsweep.report.acknowledge import load_acknowledged

    rule = rule_from(alpha, thresholds, correction)
    accepted = load_acknowledged(acknowledged) if acknowledged else []
    built = build_report(results_uri, selection_from(**filters), rule, accepted)
    if html_dir is not None:
        from kernelsweep.report import write_bundle
        from kernelsweep.report.html import bundle

        page = write_bundle(bundle(built), str(html_dir))
    if export_best is not None:
        from kernelsweep.report.best import export

        written = export(built.best, export_best)
        changes = record_best(results_uri, built.best)
    emit(output_format, built, allow_incorrect)
    if html_dir is not None:
        console.print(f"HTML report: {escape(str(page))}", highlight=False, soft_wrap=True)
    if export_best is not None:
        console.print(
            f"best configurations of {written} shape(s): {escape(str(export_best))}", highlight=False, soft_wrap=True
        )
        for line in changes:
            console.print(line, highlight=False, soft_wrap=True)
    sys.exit(built.exit_code(allow_incorrect))


def record_best(results_uri: str, best: list[Best]) -> list[str]:
    """The report's bests into the tuned store beside the results; a line per key that changed."""
    from kernelsweep.tuned.record import CONFIRMED, NEW, REPLACED, record
    from kernelsweep.tuned.store import TunedStore

    store = TunedStore(results_uri)
    changes = record(store, best, by="report")
    moved = [c for c in changes if c.action in (NEW, REPLACED)]
    return [f"tuned store {store.uri}: {len(moved)} of {len(changes)} key(s) new or replaced"] + [
        f"  {c.line()}" for c in changes if c.action != CONFIRMED
    ]


def emit(output_format: str, built: Report, allow_incorrect: bool) -> None:
    from kernelsweep.report import formats

    if output_format == "json":
        print(strict_json.dumps(formats.report_json(built, allow_incorrect), indent=1))
    elif output_format == "markdown":
        print(formats.report_markdown(built, allow_incorrect), end="")
    else:
        render(built)


def render(built: Report) -> None:
    simulated = " (simulated)" if built.is_simulation else ""
    out.print(_table(f"Latest result per point{simulated}", _latest(built)))
    if built.failed or built.incorrect:
        out.print(_table("Failed or incorrect points (latest run)", built.failure_rows(), drop=("flow_run_id",)))
    regressions = built.regression_rows()
    title = f"Regressions: {len(regressions)} step(s) slower" if regressions else "Regressions: none"
    drop = ("flow_run_id", "dtype", "ci_low_percent", "ci_high_percent", *TRIAGE_DETAILS)
    out.print(_table(title, _with_interval(regressions), drop=drop) if regressions else title, highlight=False)
    out.print(f"steps judged with {built.method}", highlight=False)
    why = [{k: r[k] for k in ("kernel", "shape", "dtype", "platform", "why")} for r in built.summary_rows() if r["why"]]
    if why:
        out.print(_table("Why: the engine that bounds each point", why))
    if built.speedups:
        title = "Each kernel against its baseline: speedup = baseline / kernel latency"
        out.print(_table(title, built.speedup_rows(), drop=("why",)))
    if len(built.platforms) > 1:
        out.print(_table("Across platforms: latency (us) and % of each platform's peak", built.cross_rows()))
    if built.best:
        judged = built.rule.describe(len(built.best), "shape(s)")
        title = f"Best configuration per shape (runner-up / best judged with {judged})"
        uniform = tuple(c for c in ("dtype", "platform") if len({b[c] for b in built.best_rows()}) == 1)
        out.print(_table(title, built.best_rows(), drop=("why", "row_id", "runner_up", *uniform)), highlight=False)
    if built.matrix:
        out.print(_table("Kernel x toolchain x LNC: points traced, compiled, correct", built.matrix))
    if built.tuned_changes:
        title = "Tuned store: bests replaced, newest first (each by a contest's clear win; why: its gap)"
        out.print(_table(title, built.tuned_rows(), drop=("verdict",)), highlight=False)


def _with_interval(rows: list[dict[str, Cell]]) -> list[dict[str, Cell]]:
    """The change with its interval in one cell, and causes without the simulator's build suffix."""
    return [
        {
            **r,
            "change_percent": f"{r['change_percent']:+} [{r['ci_low_percent']:+}, {r['ci_high_percent']:+}]",
            "cause": str(r["cause"]).replace(SIM_VERSION_SUFFIX, ""),
            "state": status_cell(r),
        }
        for r in rows
    ]


def status_cell(row: dict[str, Cell]) -> str:
    """The state with the person's word on it in one cell: `fixed by 2.23.1`, `acknowledged: why`."""
    state = f"{row['state']} by {row['fixed_by']}" if row.get("fixed_by") else str(row["state"])
    return f"{state}: {row['reason']}" if row.get("reason") else state


def _latest(built: Report) -> list[dict[str, Cell]]:
    rows = []
    for row in built.summary_rows():
        low, high = row["median_low_us"], row["median_high_us"]
        rows.append(
            {
                "kernel": row["kernel"],
                "shape": row["shape"],
                **({"variant": row["variant"]} if "variant" in row else {}),
                "dtype": row["dtype"],
                "platform": row["platform"],
                "status": row["status"],
                "median us": row["median_us"],
                "95% CI of median": None if low is None else f"{low}-{high}",
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
    if value in ("failed", "incorrect"):
        return f"[red]{value}[/red]"
    return escape(str(value))  # error messages hold [NCC_...] codes that are not markup
