"""A comparison or a report for machines (JSON, schema in docs/compare.schema.json and
docs/report.schema.json) and for reviews (Markdown, fit for a pull-request comment)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kernelsweep.report.compare import Comparison, PointComparison
from kernelsweep.report.stats import CORRECTION_NAMES, interval
from kernelsweep.report.summary import Cell, Report

EXIT_MEANING = {0: "no regression", 1: "regression", 3: "suspected regression left undecided"}
FORMAT_VERSION = 1


def _number(value: float | None) -> float | None:
    """JSON has no infinity: an unbounded interval end is null."""
    return value if value is not None and math.isfinite(value) else None


def _method(c: Comparison) -> dict[str, Any]:
    rule = c.rule
    return {
        "threshold": rule.threshold,
        "per_kernel_threshold": dict(rule.per_kernel),
        "alpha": rule.alpha,
        "confidence": 1 - 2 * rule.alpha,
        "correction": CORRECTION_NAMES[rule.correction],
        "tested": len(c.measured),
        "summary": c.method,
    }


def _point(c: Comparison, p: PointComparison) -> dict[str, Any]:
    e = p.effect
    return {
        "key": dict(zip(c.key_names, p.key, strict=True)),
        "outcome": p.outcome,
        "why": p.why,
        "a_us": _number(p.a_us),
        "b_us": _number(p.b_us),
        "ratio": _number(e.ratio) if e else None,
        "ci_low": _number(e.low) if e else None,
        "ci_high": _number(e.high) if e else None,
        "p_value": e.p_value if e else None,
        "p_adjusted": p.adjusted_p,
        "suspect": p.suspect,
        "interval_method": e.method if e else None,
        "runs": [len(p.a), len(p.b)],
        "repeats": list(e.repeats) if e else None,
        "bound": p.bound,
    }


def comparison_json(c: Comparison) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "title": c.title,
        "a": c.a_label,
        "b": c.b_label,
        "simulated": any(r.is_simulation for p in c.points for r in p.a + p.b),
        "metric": {"name": c.metric, "unit": c.unit},
        "method": _method(c),
        "notes": list(c.notes),
        "points": [_point(c, p) for p in c.points],
        "geometric_means": [
            {"kernel": k, "ratio": _number(g), "ci_low": _number(lo), "ci_high": _number(hi)}
            for k, (g, lo, hi) in c.geomeans().items()
        ],
        "counts": {o: c.count(o) for o in sorted({p.outcome for p in c.points})},
        "only_a": [dict(zip(c.key_names, k, strict=True)) for k in c.only_a],
        "only_b": [dict(zip(c.key_names, k, strict=True)) for k in c.only_b],
        "exit_code": c.exit_code,
        "exit_meaning": EXIT_MEANING[c.exit_code],
    }


def _cell(value: object) -> str:
    text = "-" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: list[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]


def comparison_markdown(c: Comparison, points: Sequence[PointComparison] | None = None) -> str:
    """The comparison for a review; its table lists `points` (default: every point), the rest counts all."""
    simulated = " (simulated)" if comparison_json(c)["simulated"] else ""
    verdict = {"slower": "**slower**", "newly failed": "**newly failed**", "newly incorrect": "**newly incorrect**"}
    rows = [
        [
            *p.key,
            f"{p.a_us:.2f}" if p.a_us else "-",
            f"{p.b_us:.2f}" if p.b_us else "-",
            interval(p.effect) if p.effect else "-",
            verdict.get(p.outcome, p.outcome),
            p.why,
            p.bound,
        ]
        for p in (c.points if points is None else points)
    ]
    lines = [f"### {c.title}{simulated}", "", f"B / A with {c.method}.", ""]
    lines += markdown_table(
        [*c.key_names, f"A {c.unit}", f"B {c.unit}", "change [CI]", "verdict", "why", "bound (B)"], rows
    )
    means = c.geomeans()
    if means:
        lines += ["", "Geometric mean of B / A per kernel:", ""]
        lines += markdown_table(
            ["kernel", "B / A", "CI"], [[k, f"{g:.3f}", f"[{lo:.3f}, {hi:.3f}]"] for k, (g, lo, hi) in means.items()]
        )
    lines += ["", ", ".join(f"{n} {o}" for o, n in comparison_json(c)["counts"].items())]
    lines += [f"> {note}" for note in c.notes]
    lines += ["", f"exit {c.exit_code}: {EXIT_MEANING[c.exit_code]}"]
    return "\n".join(lines) + "\n"


def report_json(r: Report, allow_incorrect: bool = False) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "results": r.results_uri,
        "selection": r.selection.describe(),
        "generated_at": r.generated_at.isoformat(),
        "simulated": r.is_simulation,
        "method": r.rule.describe(r.steps_tested, "place(s) a step could be"),
        "latest": r.summary_rows(),
        "failed": r.failure_rows(),
        "regressions": r.regression_rows(),
        "open_regressions": len(r.open_regressions),
        "drifts": r.regression_rows(r.drifts),
        "cross_platform": r.cross_rows(),
        "best": r.best_rows(),
        "matrix": r.matrix,
        "speedups": r.speedup_rows(),
        "exit_code": r.exit_code(allow_incorrect),
    }


def report_markdown(r: Report, allow_incorrect: bool = False) -> str:
    def table(rows: list[dict[str, Cell]]) -> list[str]:
        return markdown_table(list(rows[0]), [list(row.values()) for row in rows]) if rows else ["(none)"]

    simulated = " (simulated)" if r.is_simulation else ""
    lines = [
        f"### kernelsweep report{simulated}",
        "",
        f"{r.selection.describe()}; {r.method}.",
    ]
    lines += ["", "#### Regressions", "", *table(r.regression_rows())]
    lines += ["", "#### Drift against the selection's first runs", "", *table(r.regression_rows(r.drifts))]
    lines += ["", "#### Failed or incorrect points", "", *table(r.failure_rows())]
    lines += ["", "#### Latest result per point", "", *table(r.summary_rows())]
    if r.best:
        lines += ["", "#### Best configuration per shape", "", *table(r.best_rows())]
    if r.matrix:
        lines += ["", "#### Kernel x toolchain x LNC", "", *table(r.matrix)]
    if r.speedups:
        title = "#### Each kernel against its baseline (speedup = baseline / kernel)"
        lines += ["", title, "", *table(r.speedup_rows())]
    lines += ["", f"exit {r.exit_code(allow_incorrect)}"]
    return "\n".join(lines) + "\n"
