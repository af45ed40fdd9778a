"""The compare page: one self-contained HTML file with the comparison's picture and its table.

The chart gives every point a labelled row: B / A with its interval, sorted by the change, coloured
by verdict (red only for what regressed), against the 1.0 line and the threshold band; a failed or
incorrect point, which has no ratio, is a cross with its outcome; below it, each kernel's geometric
mean with its interval. A headline says the exit code and the count of each outcome. The table
under it is the same as `compare --format markdown`'s.
"""

from __future__ import annotations

import math
from html import escape

from matplotlib.figure import Figure

from kernelsweep.report.compare import Comparison, PointComparison
from kernelsweep.report.formats import EXIT_MEANING
from kernelsweep.report.html import INDEX, figure, page_head, table
from kernelsweep.report.plots import to_png
from kernelsweep.report.stats import interval
from kernelsweep.report.summary import Cell

VERDICT_COLOURS = {  # only what needs acting on is red
    "slower": "#d62728",
    "newly failed": "#8b0000",
    "newly incorrect": "#8b0000",
    "inconclusive": "#ff9f1c",
    "faster": "#2ca02c",
    "fixed": "#2ca02c",
    "same": "#7f7f7f",
    "failed in both": "#7f7f7f",
}
REGRESSED_ROWS = ("slower", "newly failed", "newly incorrect")
CHART = "compare.png"
MAX_ROWS = 80  # a chart of more points draws the largest changes and every point without a ratio


def label(c: Comparison, p: PointComparison) -> str:
    return " ".join(str(part) for part in p.key if part)


def shown(c: Comparison) -> list[PointComparison]:
    """The points the chart draws, by B / A (points without one, failed or incorrect, first)."""
    unmeasured = [p for p in c.points if p.effect is None]
    measured = [p for p in c.points if p.effect is not None]
    room = max(0, MAX_ROWS - len(unmeasured))
    largest = sorted(measured, key=lambda p: -abs(math.log(p.effect.ratio)) if p.effect else 0)[:room]
    return unmeasured + sorted(largest, key=lambda p: p.effect.ratio if p.effect else 1)


def chart(c: Comparison) -> bytes:
    """A horizontal dot plot: one labelled row per point, its B / A and interval coloured by verdict;
    a point with no ratio (failed, incorrect) is a cross at the right edge, its outcome written."""
    points = shown(c)
    means = c.geomeans()
    figure_ = Figure(figsize=(10, 2.5 + 0.2 * len(points) + 0.3 * len(means)))
    ratio_axes, mean_axes = figure_.subplots(2, 1, height_ratios=[max(2, 0.2 * len(points)), max(1, 0.4 * len(means))])
    threshold = c.rule.threshold
    ratio_axes.axvspan(1 - threshold, 1 + threshold, color="#dddddd", alpha=0.6)
    measured = [p.effect for p in points if p.effect]
    edge = max([min(e.high, 1e3) for e in measured if math.isfinite(e.high)] + [1 + 2 * threshold]) * 1.02
    for verdict, colour in VERDICT_COLOURS.items():
        mine = [(row, p) for row, p in enumerate(points) if p.outcome == verdict]
        drawn = [(row, p.effect) for row, p in mine if p.effect]
        if drawn:
            ratio_axes.errorbar(
                [e.ratio for _, e in drawn],
                [row for row, _ in drawn],
                xerr=[[e.ratio - max(e.low, 1e-3) for _, e in drawn], [min(e.high, edge) - e.ratio for _, e in drawn]],
                fmt="o", markersize=4, color=colour, label=verdict,
            )  # fmt: skip
        crossed = [row for row, p in mine if p.effect is None]
        if crossed:
            ratio_axes.scatter([edge] * len(crossed), crossed, marker="X", s=60, color=colour, label=verdict)
            for row in crossed:
                ratio_axes.annotate(verdict, (edge, row), xytext=(-6, 0), textcoords="offset points", ha="right",
                                    va="center", fontsize=7, color=colour)  # fmt: skip
    ratio_axes.axvline(1.0, color="black", linewidth=0.8)
    ratio_axes.set_yticks(range(len(points)), [label(c, p) for p in points], fontsize=7)
    ratio_axes.invert_yaxis()
    omitted = len(c.points) - len(points)
    extra = (
        f" ({len(points)} of {len(c.points)}: the largest changes and every point without a ratio)" if omitted else ""
    )
    ratio_axes.set_xlabel(f"B / A, {1 - 2 * c.rule.alpha:.0%} interval{extra}")
    ratio_axes.set_title(f"{c.title}: band = +-{threshold:.0%} threshold", fontsize=9)
    ratio_axes.legend(fontsize=7, loc="lower right")
    ratio_axes.grid(True, which="both", alpha=0.3)
    for row, (mean, lowest, highest) in enumerate(means.values()):
        mean_axes.errorbar(mean, row, xerr=[[mean - lowest], [highest - mean]], fmt="s", color="black", capsize=3)
    mean_axes.axvline(1.0, color="black", linewidth=0.8)
    mean_axes.axvspan(1 - threshold, 1 + threshold, color="#dddddd", alpha=0.6)
    mean_axes.set_yticks(range(len(means)), list(means), fontsize=8)
    mean_axes.set_xlabel("geometric mean of B / A per kernel (measured points only), with its interval")
    mean_axes.grid(True, which="both", alpha=0.3)
    return to_png(figure_)


def headline(c: Comparison) -> str:
    """The verdict in one sentence: the exit code and the count of each outcome, worst first."""
    order = [*REGRESSED_ROWS, "inconclusive", "fixed", "faster", "same", "failed in both"]
    counts = [f"{c.count(o)} {o}" for o in order if c.count(o)]
    suspects = sum(p.suspect for p in c.points)
    if suspects:
        counts = [f"{part} ({suspects} suspect)" if part.endswith(" inconclusive") else part for part in counts]
    return f"Exit {c.exit_code} ({EXIT_MEANING[c.exit_code]}): {', '.join(counts)} of {len(c.points)} points."


def rows(c: Comparison) -> list[dict[str, Cell]]:
    return [
        {
            **dict(zip(c.key_names, p.key, strict=True)),
            f"A {c.unit}": round(p.a_us, 3) if p.a_us else None,
            f"B {c.unit}": round(p.b_us, 3) if p.b_us else None,
            "B / A [CI]": interval(p.effect) if p.effect else None,
            "verdict": p.outcome,
            "why": p.why,
            "bound (B)": p.bound,
        }
        for p in c.points
    ]


def bundle(c: Comparison) -> dict[str, bytes]:
    png = chart(c)
    simulated = any(r.is_simulation for p in c.points for r in p.a + p.b)
    parts = [
        page_head(f"kernelsweep compare: {c.title}"),
        f"<h1>{escape(c.title)}</h1>",
        f"<h2>{escape(headline(c))}</h2>",
        f"<p class='method'>B / A with {escape(c.method)}.</p>",
        "<p class='banner'>Simulated toolchain: these rows are not hardware measurements.</p>" if simulated else "",
        *(f"<p class='bad'>{escape(note)}</p>" for note in c.notes),
        figure(CHART, "B / A per point, sorted, coloured by verdict; geometric mean per kernel", png),
        table(rows(c), bad=("verdict",), bad_values=REGRESSED_ROWS),
        "</body></html>",
    ]
    return {INDEX: "\n".join(parts).encode()}  # the chart is embedded: its one copy
