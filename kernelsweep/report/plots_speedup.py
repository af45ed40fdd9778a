"""Each kernel against its baseline: the speedup per shape with its interval (kernelsweep.report.speedup)."""

from __future__ import annotations

import itertools

from matplotlib.figure import Figure

from kernelsweep.report.plots import MARKERS, Chart, _colour, to_png
from kernelsweep.report.speedup import Speedup

VERDICT_COLOURS = {"faster": "#2ca02c", "slower": "#d62728", "same": "#7f7f7f", "inconclusive": "#ff7f0e"}


def speedup_charts(found: list[Speedup]) -> dict[str, Chart]:
    """One chart per kernel: baseline / kernel per shape (above 1: the kernel is faster), the interval
    as an error bar, one marker per platform and dtype, the verdict as the bar's colour."""
    charts = {}
    for kernel in sorted({s.kernel for s in found}):
        mine = [s for s in found if s.kernel == kernel and s.speedup is not None]
        if mine:
            charts[kernel] = _chart(kernel, mine)
    return charts


def _chart(kernel: str, found: list[Speedup]) -> Chart:
    shapes = list(dict.fromkeys(s.shape for s in found))
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    axes.axhline(1.0, color="black", linewidth=1)
    lines = sorted({(s.platform, s.dtype) for s in found})
    for i, ((platform, dtype), marker) in enumerate(zip(lines, itertools.cycle(MARKERS), strict=False)):
        for s in (s for s in found if (s.platform, s.dtype) == (platform, dtype)):
            x = shapes.index(s.shape) + 0.08 * (i - (len(lines) - 1) / 2)
            low, high = s.low or s.speedup, s.high or s.speedup
            assert s.speedup is not None and low is not None and high is not None
            axes.errorbar(
                [x],
                [s.speedup],
                yerr=[[max(0.0, s.speedup - low)], [max(0.0, high - s.speedup)]],
                marker=marker,
                capsize=4,
                color=VERDICT_COLOURS.get(s.verdict, _colour(platform)),
                markeredgecolor=_colour(platform),
            )
        axes.scatter([], [], marker=marker, color=_colour(platform), label=f"{platform} {dtype}")
    for verdict, colour in VERDICT_COLOURS.items():
        axes.plot([], [], color=colour, label=f"verdict: {verdict}")
    axes.set_xticks(range(len(shapes)), shapes, rotation=20, fontsize=7, ha="right")
    axes.set_ylabel("speedup = baseline / kernel latency")
    baseline = found[0].baseline_ref or found[0].baseline
    axes.set_title(f"{kernel} against {baseline}", fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7)
    return Chart(to_png(figure), tuple(shapes))
