"""`kernelsweep compare`: kernel against kernel, run against run, or tool version against version,
with a change, its interval and a verdict per point, and an exit code CI can act on."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.flows.cli.output import EXIT_INTERNAL, EXIT_USAGE, console, fail, out
from kernelsweep.flows.cli.report import rule_from, selection_from, selection_options
from kernelsweep.report import ReportRow, strict_json
from kernelsweep.report.compare import TOOL_COLUMNS, Comparison, PointComparison
from kernelsweep.report.index import Indexed
from kernelsweep.report.interleaved import DEFAULT_REPEATS, DEFAULT_SECONDS, Budget
from kernelsweep.report.measures import MEASURES, as_measure, measure
from kernelsweep.report.series_query import Results
from kernelsweep.report.stats import Rule, interval

# 0, 1 and 3 come from Comparison.exit_code; 2 is usage; a comparison that could not be made at all
# (the results unreadable) is 4, never 3, which means "measured, and a regression is suspected".
EXIT_NOT_COMPARED = EXIT_INTERNAL
_STYLES = {
    "slower": "red",
    "newly failed": "red",
    "newly incorrect": "red",
    "faster": "green",
    "fixed": "green",
    "inconclusive": "yellow",
}


@click.command()
@selection_options
@click.option("--kernels", "kernel_pair", nargs=2, metavar="A B", help="Kernel B against kernel A, shared shapes.")
@click.option("--runs", "run_pair", nargs=2, metavar="A B", help="Flow run B against A (id, prefix, latest, previous).")
@click.option("--versions", "tool_versions", nargs=3, metavar="TOOL A B", help=f"{'|'.join(TOOL_COLUMNS)} B against A.")
@click.option(
    "--metric",
    type=click.Choice(list(MEASURES)),
    default="latency",
    show_default=True,
    help="What to judge: latency, or the compile's time or peak memory (rows that compiled).",
)
@click.option(
    "--control",
    "control",
    multiple=True,
    metavar="KERNEL",
    help="A kernel nobody changed between A and B: its points measure the shift B's whole run took, "
    "divided out of every other point of the platform (--runs, --versions; repeatable).",
)
@click.option(
    "--confirm",
    "confirm",
    is_flag=True,
    help="Decide the suspects (what exit 3 means): capture A's and B's NEFFs again, interleaved on one "
    "core, until each is decided or the budget is spent (--runs, --versions; the captures are rows too).",
)
@click.option("--budget-repeats", type=click.IntRange(6, 100_000), default=DEFAULT_REPEATS, show_default=True,
              help="With --confirm: captures of A and B together, over all suspects.")  # fmt: skip
@click.option("--budget-seconds", type=click.FloatRange(1, 86_400), default=DEFAULT_SECONDS, show_default=True,
              help="With --confirm: seconds of captures over all suspects.")  # fmt: skip
@click.option("--toolchain", type=click.Choice(["auto", "neuron", "sim"]), default="auto", show_default=True,
              help="With --confirm: the toolchain that captures.")  # fmt: skip
@click.option(
    "--html",
    "html_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write the compare page (index.html with a per-point chart) to this folder.",
)
@click.option(
    "--post",
    is_flag=True,
    help="Also create or update this pull request's one kernelsweep comment (GitHub Actions: GITHUB_TOKEN, "
    "GITHUB_REPOSITORY, the pull_request event; docs/ci.md). The exit code stays the comparison's.",
)
def compare(
    results_uri: str,
    alpha: float,
    thresholds: tuple[str, ...],
    correction: str,
    output_format: str,
    kernel_pair: tuple[str, str] | None,
    run_pair: tuple[str, str] | None,
    tool_versions: tuple[str, str, str] | None,
    metric: str,
    control: tuple[str, ...],
    confirm: bool,
    budget_repeats: int,
    budget_seconds: float,
    toolchain: str,
    html_dir: Path | None,
    post: bool,
    **filters: Any,
) -> None:
    """Compare two sides point by point; B is the candidate, A the baseline.

    Per point: the change B / A with its 1 - 2 alpha interval, and a verdict: slower (the interval
    lies above +threshold, and survives the correction over the points), faster (below -threshold),
    same (inside +-threshold), or inconclusive, with the reason (docs/reports.md).

    Exit code 0: nothing regressed; 1: some point is slower, or fails or computes wrong where A did
    not; 3: nothing proven, but some inconclusive point is a suspect (its own test leans slower;
    with --confirm: still, after the budget); 2: bad input; 4: no comparison. With --post, a missing
    token or pull request is 2 and a comment GitHub refused is 4, after the comparison is printed.
    """
    modes = (kernel_pair, run_pair, tool_versions)
    if sum(bool(value) for value in modes) != 1:
        raise UsageError("compare needs exactly one of --kernels A B, --runs A B or --versions TOOL A B")
    if control and kernel_pair:
        raise UsageError("--control needs --runs or --versions: two kernels of one run share its shift already")
    if confirm and (kernel_pair or metric != "latency"):
        raise UsageError(
            "--confirm needs --runs or --versions and the latency metric: it captures one point's two NEFFs "
            "interleaved, which cancels the shift the machine gives both only when they are the same point"
        )
    rule = rule_from(alpha, thresholds, correction)
    try:
        rows = Indexed(results_uri, selection_from(**filters))
    except UsageError:
        raise
    except KernelsweepError as exc:
        fail(exc.message, EXIT_NOT_COMPARED)
    chosen = measure(metric)
    comparison = _compared(as_measure(rows, chosen), rule, kernel_pair, run_pair, tool_versions, control)
    if chosen.column is not None:
        title = f"{chosen.name}: {comparison.title}"
        comparison = replace(comparison, title=title, metric=chosen.name, unit=chosen.unit)
    if confirm:
        comparison = _confirmed(comparison, results_uri, Budget(budget_repeats, budget_seconds), toolchain)
    for note in comparison.notes:  # before the verdicts: what they can and cannot say
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
    emit(output_format, comparison)
    page = None
    if html_dir is not None:
        from kernelsweep.report import write_bundle
        from kernelsweep.report.compare_page import bundle

        page = write_bundle(bundle(comparison), str(html_dir))
        console.print(f"compare page: {escape(page)}", highlight=False)
    if post:
        _post(comparison, page)
    sys.exit(comparison.exit_code)


def _post(comparison: Comparison, page: str | None) -> None:
    """The PR's one kernelsweep comment, created or updated; the comparison is already printed, so a
    failure here is one line and its own exit code (2: not set up to post, 4: GitHub refused)."""
    import os

    from kernelsweep.flows.settings import reports_url_from_env
    from kernelsweep.report import pr_comment
    from kernelsweep.report.publish import browser_link

    try:
        pr = pr_comment.pull_request(os.environ)
    except UsageError as exc:
        fail(exc.message, EXIT_USAGE)
    link = browser_link(page, reports_url_from_env()) if page else None
    try:
        posted = pr_comment.post(
            pr, pr_comment.body(comparison, pr, link if link and link.startswith("http") else None)
        )
    except pr_comment.PostFailed as exc:
        fail(exc.message, EXIT_NOT_COMPARED)
    console.print(f"pull request comment {posted.action}: {escape(posted.url)}", highlight=False, soft_wrap=True)


def _confirmed(comparison: Comparison, results_uri: str, budget: Budget, toolchain: str) -> Comparison:
    """The suspects decided by interleaved captures (kernelsweep.this_host.confirm); its notes say the cost,
    and what budget would decide what is still undecided."""
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.this_host import confirm

    if not confirm.suspects(comparison):
        console.print("confirmation: no suspect point, nothing to capture", highlight=False)
        return comparison
    return confirm.run(comparison, results_uri, locations_from_env(), toolchain, budget).comparison


def _compared(
    rows: Results | list[ReportRow],
    rule: Rule,
    kernel_pair: tuple[str, str] | None,
    run_pair: tuple[str, str] | None,
    tool_versions: tuple[str, str, str] | None,
    control: tuple[str, ...] = (),
) -> Comparison:
    """The one comparison the options ask for (exactly one of the three pairs)."""
    from kernelsweep.report import compare_kernels, compare_runs, compare_versions

    if kernel_pair:
        return compare_kernels(rows, *kernel_pair, rule=rule)
    if run_pair:
        return compare_runs(rows, *run_pair, rule=rule, control=control)
    assert tool_versions is not None
    return compare_versions(rows, *tool_versions, rule=rule, control=control)


def emit(output_format: str, comparison: Comparison) -> None:
    from kernelsweep.report import formats

    if output_format == "json":
        print(strict_json.dumps(formats.comparison_json(comparison), indent=1))
    elif output_format == "markdown":
        print(formats.comparison_markdown(comparison), end="")
    else:
        render(comparison)


def _short_bound(p: PointComparison) -> str:
    """B's bounding engine and how active it was; the whole line is in the JSON, Markdown and page."""
    row = p.b[0] if p.b else None
    if row is None or row.bound_engine is None or row.bound_active_percent is None:
        return "-"
    return f"{row.bound_engine} ({row.bound_active_percent:.0f}% busiest)"


def render(c: Comparison) -> None:
    from kernelsweep.report.formats import EXIT_MEANING

    simulated = " (simulated)" if any(r.is_simulation for p in c.points for r in p.a + p.b) else ""
    table = Table(title=f"{c.title}{simulated}", title_justify="left")
    for column in c.key_names:
        table.add_column(column, overflow="fold")  # a shape is read whole, never cut
    numbers = (f"A {c.unit}", f"B {c.unit}", "B / A [CI]")
    for column in (*numbers, "verdict", "why", "bound (B)"):
        table.add_column(column, justify="right" if column in numbers else "left", overflow="fold")
    for p in c.points:
        style = _STYLES.get(p.outcome)
        verdict = f"[{style}]{p.outcome}[/{style}]" if style else p.outcome
        table.add_row(
            *p.key,
            f"{p.a_us:.2f}" if p.a_us else "-",
            f"{p.b_us:.2f}" if p.b_us else "-",
            interval(p.effect) if p.effect else "-",
            verdict,
            escape(
                p.why.removeprefix(interval(p.effect)).strip() if p.effect else p.why
            ),  # the interval has its column
            escape(_short_bound(p)),
        )
    out.print(table)
    for kernel, (mean, low, high) in c.geomeans().items():
        out.print(f"geometric mean B / A, {kernel}: {mean:.3f} [{low:.3f}, {high:.3f}]", highlight=False)
    counts = ", ".join(f"{n} {o}" for o in sorted({p.outcome for p in c.points}) if (n := c.count(o)))
    out.print(f"{counts}; {c.method}", highlight=False)
    for side, keys in (("A", c.only_a), ("B", c.only_b)):
        if keys:
            out.print(f"only in {side} (not compared): {len(keys)} point(s)", highlight=False)
    out.print(f"exit {c.exit_code}: {EXIT_MEANING[c.exit_code]}", highlight=False)
