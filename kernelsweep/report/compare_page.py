"""The compare page: one self-contained HTML file with the comparison's picture and its table.

The chart puts every measured point on one axis: B / A with its interval, sorted by the change,
coloured by verdict, against the 1.0 line and the threshold band; below it, each kernel's geometric
mean with its interval. The table under it is the same as `compare --format markdown`'s.
"""

from __future__ import annotations

from html import escape

from matplotlib.figure import Figure

from kernelsweep.report.compare import Comparison
from kernelsweep.report.html import INDEX, figure, page_head, table
from kernelsweep.report.plots import to_png
from kernelsweep.report.stats import interval
from kernelsweep.report.summary import Cell

VERDICT_COLOURS = {"slower": "#d62728", "faster": "#2ca02c", "same": "#7f7f7f", "inconclusive": "#ff9f1c"}
CHART = "compare.png"


def chart(c: Comparison) -> bytes:
    points = sorted((p for p in c.measured if p.effect), key=lambda p: p.effect.ratio if p.effect else 1)
    means = c.geomeans()
    figure_ = Figure(figsize=(10, 5.5 + 0.3 * len(means)))
    ratio_axes, mean_axes = figure_.subplots(2, 1, height_ratios=[3, max(1, 0.4 * len(means))])
    threshold = c.rule.threshold
    ratio_axes.axhspan(1 - threshold, 1 + threshold, color="#dddddd", alpha=0.6)
    for verdict, colour in VERDICT_COLOURS.items():
        mine = [(i, p.effect) for i, p in enumerate(points) if p.outcome == verdict and p.effect]
        if not mine:
            continue
        ratios = [e.ratio for _, e in mine]
        low = [e.ratio - max(e.low, 1e-3) for _, e in mine]
        high = [min(e.high, 1e3) - e.ratio for _, e in mine]
        ratio_axes.errorbar(
            [i for i, _ in mine], ratios, yerr=[low, high], fmt="o", markersize=3, color=colour, label=verdict
        )
    ratio_axes.axhline(1.0, color="black", linewidth=0.8)
    ratio_axes.set_xlabel(f"{len(points)} points, sorted by B / A")
    ratio_axes.set_ylabel(f"B / A, {1 - 2 * c.rule.alpha:.0%} interval")
    ratio_axes.set_title(f"{c.title}: band = +-{threshold:.0%} threshold", fontsize=9)
    ratio_axes.legend(fontsize=7, loc="upper left")
    ratio_axes.grid(True, which="both", alpha=0.3)
    for row, (mean, lowest, highest) in enumerate(means.values()):
        mean_axes.errorbar(mean, row, xerr=[[mean - lowest], [highest - mean]], fmt="s", color="black", capsize=3)
    mean_axes.axvline(1.0, color="black", linewidth=0.8)
    mean_axes.axvspan(1 - threshold, 1 + threshold, color="#dddddd", alpha=0.6)
    mean_axes.set_yticks(range(len(means)), list(means), fontsize=8)
    mean_axes.set_xlabel("geometric mean of B / A per kernel, with its interval")
    mean_axes.grid(True, which="both", alpha=0.3)
    return to_png(figure_)


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
        f"<p class='method'>B / A with {escape(c.method)}. Exit {c.exit_code}.</p>",
        "<p class='banner'>Simulated toolchain: these rows are not hardware measurements.</p>" if simulated else "",
        *(f"<p class='bad'>{escape(note)}</p>" for note in c.notes),
        figure(CHART, "B / A per point, sorted, coloured by verdict; geometric mean per kernel", png),
        table(rows(c), bad=("verdict",)),
        "</body></html>",
    ]
    return {INDEX: "\n".join(parts).encode()}  # the chart is embedded: its one copy
