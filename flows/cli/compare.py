"""`kernelsweep compare`: kernel against kernel, run against run, or tool version against version,
with a verdict per point and an exit code CI can act on."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.flows.cli.output import EXIT_INTERNAL, fail, out
from kernelsweep.flows.cli.report import selection_from, selection_options
from kernelsweep.report.compare import TOOL_COLUMNS, Comparison
from kernelsweep.report.load import ReportRow, load

# 0, 1 and 3 come from Comparison.exit_code; 2 is usage; a comparison that could not be made at all
# (the results unreadable) is 4, never 3, which means "measured, but inconclusive".
EXIT_NOT_COMPARED = EXIT_INTERNAL
_STYLES = {"slower": "red", "newly failed": "red", "faster": "green", "fixed": "green", "inconclusive": "yellow"}
_MEANING = {0: "no regression", 1: "regression", 3: "inconclusive only"}


@click.command()
@selection_options
@click.option("--kernels", "kernel_pair", nargs=2, metavar="A B", help="Kernel B against kernel A, shared shapes.")
@click.option("--runs", "run_pair", nargs=2, metavar="A B", help="Flow run B against A (id, prefix, latest, previous).")
@click.option("--versions", "tool_versions", nargs=3, metavar="TOOL A B", help=f"{'|'.join(TOOL_COLUMNS)} B against A.")
def compare(
    results_uri: str,
    alpha: float,
    kernel_pair: tuple[str, str] | None,
    run_pair: tuple[str, str] | None,
    tool_versions: tuple[str, str, str] | None,
    **filters: Any,
) -> None:
    """Compare two sides point by point; B is the candidate, A the baseline.

    Verdict per point: faster, slower, same or inconclusive, from the repeats of each row (an exact
    rank test with Holm's correction over the points, and a noise floor; docs/reports.md).

    Exit code 0: nothing regressed; 1: some point is slower, or fails where A ran; 3: nothing
    regressed but some verdicts are inconclusive; 2: bad input; 4: the comparison could not be made.
    """
    from kernelsweep.report.compare import compare_kernels, compare_runs, compare_versions

    modes = (("--kernels", kernel_pair), ("--runs", run_pair), ("--versions", tool_versions))
    chosen = [name for name, value in modes if value]
    if len(chosen) != 1:
        raise UsageError("compare needs exactly one of --kernels A B, --runs A B or --versions TOOL A B")
    try:
        results = load(results_uri, selection_from(**filters))
    except UsageError:
        raise
    except KernelsweepError as exc:
        fail(exc.message, EXIT_NOT_COMPARED)
    if kernel_pair:
        comparison = compare_kernels(results, *kernel_pair, alpha=alpha)
    elif run_pair:
        comparison = compare_runs(results, *run_pair, alpha=alpha)
    else:
        assert tool_versions is not None
        comparison = compare_versions(results, *tool_versions, alpha=alpha)
    render(comparison)
    sys.exit(comparison.exit_code)


def render(c: Comparison) -> None:
    simulated = " (simulated)" if any(r.is_simulation for p in c.points for r in p.a + p.b) else ""
    table = Table(title=f"{c.title}{simulated}", title_justify="left")
    for column in c.key_names:
        table.add_column(column)
    for column in ("A us", "B us", "speedup", "verdict", "why"):
        table.add_column(column, justify="right" if column in ("A us", "B us", "speedup") else "left")
    for p in c.points:
        style = _STYLES.get(p.outcome)
        verdict = f"[{style}]{p.outcome}[/{style}]" if style else p.outcome
        table.add_row(
            *p.key,
            _latency(p.a, p.a_us),
            _latency(p.b, p.b_us),
            f"{p.speedup:.3f}x" if p.speedup else "-",
            verdict,
            escape(p.why),
        )
    out.print(table)
    counts = ", ".join(f"{n} {o}" for o in _outcomes(c) if (n := c.count(o)))
    geomean = f"geometric mean speedup {c.geomean_speedup:.3f}x over {sum(1 for p in c.points if p.speedup)} points; "
    out.print(f"{geomean if c.geomean_speedup else ''}{counts}", highlight=False)
    for side, keys in (("A", c.only_a), ("B", c.only_b)):
        if keys:
            out.print(f"only in {side} (not compared): {len(keys)} point(s)", highlight=False)
    out.print(f"exit {c.exit_code}: {_MEANING[c.exit_code]}", highlight=False)


def _latency(rows: list[ReportRow], level_us: float | None) -> str:
    if level_us is None:
        return "failed" if not rows[0].ok else "-"
    runs = f" ({len(rows)} runs)" if len(rows) > 1 else ""
    return f"{level_us:.2f}{runs}"


def _outcomes(c: Comparison) -> list[str]:
    return list(dict.fromkeys(p.outcome for p in sorted(c.points, key=lambda p: p.outcome)))
