"""`kernelsweep validate` and `kernelsweep run`: everything that can be checked is checked before any work."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelsweep.flows.cli.output import EXIT_PROBLEMS, console, out
from kernelsweep.results.summary import RowSummary
from kernelsweep.spec import Point, SweepSpec, expand, load_spec, parse_spec

# Embedded runs use Prefect's ephemeral server: keep its telemetry off and its logs out of the
# user's terminal unless asked for (set the variables yourself to override). A loaded host can take
# longer than Prefect's default to start the server; its timeout would print Prefect's traceback.
QUIET_PREFECT = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_SERVER_LEVEL": "CRITICAL",
    "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
}


def load(spec_path: str, **overrides: str | None) -> tuple[SweepSpec, list[Point]]:
    """The spec with command-line overrides, validated like the file itself, and its points."""
    spec = load_spec(spec_path)
    updates = {k: v for k, v in overrides.items() if v is not None}
    if updates:
        spec = parse_spec({**spec.model_dump(), **updates}, source=f"{spec_path} (with command-line overrides)")
    return spec, expand(spec, source=spec_path)


@click.command()
@click.argument("spec_path", metavar="SPEC")
def validate(spec_path: str) -> None:
    """Check a sweep spec and list its points."""
    spec, points = load(spec_path)
    table = Table(title=f"{spec.name}: {len(points)} points")
    for column in ("point id", "kernel", "shape", "dtype", "platform", "lnc"):
        table.add_column(column)
    for p in points:
        table.add_row(p.point_id, p.kernel, p.shape, p.dtype, p.platform, str(p.lnc))
    out.print(table)


@click.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--toolchain", type=click.Choice(["auto", "neuron", "sim"]), help="Override the spec's toolchain.")
@click.option("--results", help="Results folder or s3://bucket/prefix (overrides the spec).")
@click.option("--artifacts", help="Artifact store folder or s3://bucket/prefix (overrides the spec).")
def run(spec_path: str, toolchain: str | None, results: str | None, artifacts: str | None) -> None:
    """Run a sweep on this host and print a summary table."""
    from kernelsweep.context import resolve_toolchain
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.probe import probe_location

    spec, points = load(spec_path, toolchain=toolchain, results=results, artifacts=artifacts)
    # Everything that can fail before the first point fails here, before Prefect even starts: the
    # toolchain as the flow will resolve it (`--toolchain neuron` without the SDK), then the locations.
    locations = locations_from_env()
    _, notice = resolve_toolchain(spec.toolchain, locations.sim_state_dir, extra_paths=locations.tool_paths)
    probe_location(spec.results, "results", "--results")
    probe_location(spec.artifacts, "artifact store", "--artifacts")
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    from kernelsweep.flows.embedded import run_sweep  # imports Prefect: after its environment is set

    if notice:
        console.print(notice, highlight=False, soft_wrap=True)
    with _progress_bar(len(points)) as advance:
        report = run_sweep(spec, on_row=advance)
    if report.rows:
        out.print(summary_table(report.rows))
    if report.left_for_other_hosts:
        others = ", ".join(f"{n} {platform}" for platform, n in sorted(report.left_for_other_hosts.items()))
        console.print(f"left for hosts of their own platform: {others} points", highlight=False)
    for path in report.paths:
        out.print(f"results: {path}", highlight=False, soft_wrap=True)
    if report.failed:
        console.print(
            f"{report.failed} of {len(report.rows)} points failed (see error_message in the results)", highlight=False
        )
        sys.exit(EXIT_PROBLEMS)


@contextmanager
def _progress_bar(total: int) -> Iterator[Callable[[RowSummary], None]]:
    """A live bar on a terminal; in a log (CI, a worker), one plain line per tenth of the sweep."""
    if not console.is_terminal:
        yield _log_lines(total)
        return
    progress = Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task("starting", total=total)

        def advance(row: RowSummary) -> None:
            progress.update(task, advance=1, description=f"{row.kernel} {row.shape} {row.platform}: {row.status}")

        yield advance


def _log_lines(total: int) -> Callable[[RowSummary], None]:
    done = failed = 0
    step = max(1, total // 10)

    def advance(row: RowSummary) -> None:
        nonlocal done, failed
        done, failed = done + 1, failed + (not row.ok)
        if done % step == 0 or done == total:
            console.print(f"sweep: {done}/{total} points done ({failed} failed)", highlight=False)

    return advance


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def summary_table(rows: list[RowSummary]) -> Table:
    table = Table(title="kernelsweep results" + (" (simulated)" if rows and rows[0].is_simulation else ""))
    for column in ("kernel", "shape", "dtype", "platform", "status", "us", "TFLOPS", "MFU %", "% roofline", "correct"):
        table.add_column(column, justify="right" if column in ("us", "TFLOPS", "MFU %", "% roofline") else "left")
    for r in sorted(rows, key=lambda r: (r.kernel, r.platform, r.shape)):
        status = r.status if r.ok else f"[red]{r.status}: {r.error_class}[/red]"
        correct = {True: "yes", False: "[red]NO[/red]", None: "-"}[r.correct]
        table.add_row(
            r.kernel,
            r.shape,
            r.dtype,
            r.platform,
            status,
            _fmt(r.total_time_us, ".2f"),
            _fmt(r.achieved_tflops, ".2f"),
            _fmt(r.mfu_percent, ".1f"),
            _fmt(r.roofline_percent, ".1f"),
            correct,
        )
    return table
