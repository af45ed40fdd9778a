"""`kernelsweep validate` and `kernelsweep run`: everything that can be checked is checked before any work."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelsweep.flows.cli.output import EXIT_PROBLEMS, EXIT_SIGNAL_BASE, console, fail, out
from kernelsweep.results import RowSummary, SweepOutcome
from kernelsweep.sweepspec import (
    DEFAULT_MAX_POINTS,
    Expansion,
    Point,
    SweepSpec,
    expand_spec,
    load_spec,
    parse_spec,
    shape_order,
)

if TYPE_CHECKING:
    from kernelsweep.results.journal import RunHeader

# Embedded runs use Prefect's ephemeral server: keep its telemetry off and its logs out of the
# user's terminal unless asked for (set the variables yourself to override). A loaded host can take
# longer than Prefect's default to start the server; its timeout would print Prefect's traceback.
QUIET_PREFECT = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_SERVER_LEVEL": "CRITICAL",
    "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
    # Prefect's own machinery (its events worker, when the API went away and came back) logs apart.
    "PREFECT_INTERNAL_LOGGING_LEVEL": "CRITICAL",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
}


TABLE_POINTS = 1000  # `validate` lists each point up to this many; above, their counts

MAX_POINTS_OPTION = click.option(
    "--max-points",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_POINTS,
    show_default=True,
    help="Refuse a spec that expands to more points (counted before any is built).",
)


def load(
    spec_path: str, max_points: int = DEFAULT_MAX_POINTS, **overrides: str | None
) -> tuple[SweepSpec, list[Point]]:
    """The spec with command-line overrides, validated like the file itself, and its points (each
    once: what was merged is said on stderr)."""
    spec, expansion = load_expansion(spec_path, max_points, **overrides)
    return spec, expansion.points


def load_expansion(
    spec_path: str, max_points: int = DEFAULT_MAX_POINTS, **overrides: str | None
) -> tuple[SweepSpec, Expansion]:
    from kernelsweep.this_host.context import host_memory_bytes

    spec = load_spec(spec_path)
    updates = {k: v for k, v in overrides.items() if v is not None}
    if updates:
        spec = parse_spec({**spec.model_dump(), **updates}, source=f"{spec_path} (with command-line overrides)")
    expansion = expand_spec(spec, source=spec_path, max_points=max_points, host_memory_bytes=host_memory_bytes())
    for notice in expansion.notices:
        console.print(escape(notice), highlight=False, soft_wrap=True)
    if expansion.drops.total:
        note = f"{spec_path}: {expansion.drops.total} point(s) dropped (`kernelsweep validate` lists why)"
        console.print(escape(note), highlight=False, soft_wrap=True)
    return spec, expansion


def _repeats_note(spec: SweepSpec, points: int) -> None:
    """Before any work (and once the input is known good): a sweep whose comparisons can never
    decide a lone change is worth knowing about."""
    from kernelsweep.report.ranks import reach_warning

    warning = reach_warning(spec.capture.repeats, points)
    if warning:
        note = f"note: capture.repeats = {spec.capture.repeats}: {escape(warning)}"
        console.print(note, highlight=False, soft_wrap=True)


@click.command()
@click.argument("spec_path", metavar="SPEC")
@MAX_POINTS_OPTION
def validate(spec_path: str, max_points: int) -> None:
    """Check a sweep spec and list its points (above 1,000, their count per kernel and dtype), what each
    block's strategy picked, and what was dropped why."""
    from kernelsweep.sweepspec import count_points
    from kernelsweep.sweepspec.expansion_text import describe

    if count_points(load_spec(spec_path)) > TABLE_POINTS:
        _validate_many(spec_path, max_points)
        return
    spec, expansion = load_expansion(spec_path, max_points)
    points = expansion.points
    _repeats_note(spec, len(points))
    table = Table(title=f"{spec.name}: {len(points)} points")
    extra = [
        c for c, used in (("tunables", any(p.tunables for p in points)), ("toolchain", bool(spec.toolchains))) if used
    ]
    for column in ("point id", "kernel", "shape", "dtype", "platform", "lnc", *extra):
        table.add_column(column)
    for p in points:
        cells = {"tunables": p.tunables_text, "toolchain": p.toolchain_name}
        table.add_row(p.point_id, p.kernel, p.shape, p.dtype, p.platform, str(p.lnc), *(cells[c] for c in extra))
    out.print(table)
    for line in describe(expansion):
        out.print(escape(line), highlight=False, soft_wrap=True)


def _validate_many(spec_path: str, max_points: int) -> None:
    """Every point checked one at a time, none kept (a million points in bounded memory), and counted:
    a table of a million rows would help nobody."""
    from kernelsweep.sweepspec.expansion import count_spec
    from kernelsweep.sweepspec.expansion_text import describe
    from kernelsweep.this_host.context import host_memory_bytes

    spec = load_spec(spec_path)
    expansion = count_spec(spec, spec_path, max_points=max_points, host_memory_bytes=host_memory_bytes())
    for notice in expansion.notices:
        console.print(escape(notice), highlight=False, soft_wrap=True)
    total = sum(sum(plan.valid.values()) for plan in expansion.blocks)
    _repeats_note(spec, total)
    table = Table(title=f"{spec.name}: {total:,} points, every one checked")
    for column in ("block", "kernel", "dtype", "points"):
        table.add_column(column, justify="right" if column == "points" else "left")
    for plan in expansion.blocks:
        for dtype, count in sorted(plan.valid.items()):
            table.add_row(str(plan.index), escape(plan.kernel), dtype, f"{count:,}")
    out.print(table)
    for line in describe(expansion):
        out.print(escape(line), highlight=False, soft_wrap=True)


@click.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--toolchain", type=click.Choice(["auto", "neuron", "cpu", "sim"]), help="Override the spec's toolchain.")
@click.option("--results", help="Results folder or s3://bucket/prefix (overrides the spec).")
@click.option("--artifacts", help="Artifact store folder or s3://bucket/prefix (overrides the spec).")
@MAX_POINTS_OPTION
@click.option(
    "--remeasure",
    is_flag=True,
    help="When resuming an interrupted run of this spec, measure again the points it finished (default: reuse them).",
)
def run(
    spec_path: str, toolchain: str | None, results: str | None, artifacts: str | None, max_points: int, remeasure: bool
) -> None:
    """Run a sweep on this host and print a summary table.

    A run of the same spec that was interrupted (Ctrl-C, SIGTERM, a crash, its results location
    failing) is resumed: its finished points are reused under its run id, the rest are measured.
    """
    from kernelsweep.results import plan_resume, run_key

    spec, expansion = load_expansion(spec_path, max_points, toolchain=toolchain, results=results, artifacts=artifacts)
    points = expansion.points
    searched = sum(t.settings.budget for t in expansion.targets)  # at most: a search may use up its space first
    notice = _preflight(spec)
    plan = plan_resume(spec.results_location, run_key(spec), points, find=True, remeasure=remeasure)
    if plan.resumed is not None:
        _announce_resume(plan.resumed, len(plan.reused), len(points), remeasure, len(expansion.targets))
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    from kernelsweep.flows import embedded  # imports Prefect: after its environment is set

    api = embedded.start_api()  # the run's own server, if it needs one, boots while the flow imports
    from kernelsweep.flows.host_run import SweepInterrupted

    if notice:
        console.print(notice, highlight=False, soft_wrap=True)
    _repeats_note(spec, len(points))
    with _progress_bar(len(points) - len(plan.reused) + searched) as advance, _notices_on_stderr():
        try:
            report = embedded.run_sweep(
                spec,
                on_row=advance,
                api=api,
                resume_run_id=plan.resumed.run_id if plan.resumed else None,
                remeasure=remeasure,
                max_points=max_points,
            )
        except SweepInterrupted as exc:
            fail(f"interrupted: {exc.message}", EXIT_SIGNAL_BASE + (embedded.stopped_by.signal or signal.SIGINT))
    _print_outcome(report, len(plan.reused))


def _preflight(spec: SweepSpec) -> str | None:
    """Everything that can fail before the first point fails here, before Prefect even starts: the
    host folders, the toolchain as the flow will resolve it (`--toolchain neuron` without the SDK),
    then the locations. Returns the toolchain's notice (the simulator is used), if any."""
    from kernelsweep.flows.cli.checks import check_api_url, check_temp_dir
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.stores import probe_location
    from kernelsweep.this_host.context import check_cores, check_named_pythons, neuron_python, resolve_toolchain

    check_api_url()
    check_temp_dir()
    check_named_pythons(spec)
    locations = locations_from_env()
    python = neuron_python(spec.neuron_python, locations) if spec.toolchain != "sim" else None
    toolchain, notice = resolve_toolchain(spec.toolchain, locations.sim_state_dir, locations.tool_paths, python)
    check_cores(toolchain)
    probe_location(spec.results_location, "results", "--results")
    probe_location(spec.artifacts_location, "artifact store", "--artifacts")
    return notice


def _announce_resume(resumed: RunHeader, reused: int, total: int, remeasure: bool, searches: int = 0) -> None:
    """A search's trials are not known up front: it is named apart from the grid's points."""
    what = "measuring every point again (--remeasure)" if remeasure else f"reusing {reused} finished point(s)"
    parts = [f"{what}, running the other {total - reused}"] if total else []
    if searches:
        parts.append(f"{searches} search(es) go on from their stored trials")
    console.print(
        f"resuming run {resumed.run_id} of {resumed.run_date} (interrupted): {'; '.join(parts)}",
        highlight=False,
        soft_wrap=True,
    )


def _print_outcome(report: SweepOutcome, reused: int) -> None:
    """The table, where the rows went, and exit 1 when some points failed (their rows are written)."""
    if report.rows:
        out.print(summary_table(report.rows))
    if report.left_for_other_hosts:
        others = ", ".join(f"{n} {platform}" for platform, n in sorted(report.left_for_other_hosts.items()))
        console.print(f"left for hosts of their own platform: {others} points", highlight=False)
    if reused:
        console.print(f"reused {reused} point(s) measured by the interrupted run", highlight=False)
    for path in report.paths:
        out.print(f"results: {escape(path)}", highlight=False, soft_wrap=True)
    if report.failed:
        console.print(
            f"{report.failed} of {len(report.rows)} points failed (see error_message in the results)", highlight=False
        )
        sys.exit(EXIT_PROBLEMS)


class _StderrLines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        console.print(escape(" ".join(record.getMessage().split())), highlight=False, soft_wrap=True)


@contextmanager
def _notices_on_stderr() -> Iterator[None]:
    """kernelsweep's own warnings (a capture waiting on a core someone else holds, a cache entry
    rebuilt, a signal received) as one line each on stderr; Prefect's logs stay quiet."""
    logger, handler = logging.getLogger("kernelsweep"), _StderrLines(logging.WARNING)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


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
    for r in sorted(rows, key=lambda r: (r.kernel, r.platform, shape_order(r.shape), r.dtype)):
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
