"""The regression charts: one summary of every step (sorted by size, coloured by cause) before the
per-series charts, each series over time with the windows its step was judged on."""

from __future__ import annotations

import itertools

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kernelsweep.report.plots import MARKERS, error_bars, simulated_tag, to_png
from kernelsweep.report.regress import History, Step
from kernelsweep.sim import SIM_VERSION_SUFFIX as SIM_SUFFIX

CAUSE_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f")


def short(text: str) -> str:
    """A version or cause without the simulator's build suffix, for labels."""
    return text.replace(SIM_SUFFIX, "")


def steps_summary(steps: list[Step]) -> bytes:
    """Every step as one bar of its change with its interval, sorted by size, coloured by cause."""
    ordered = sorted(steps, key=lambda s: s.effect.change)
    causes = list(dict.fromkeys(short(s.cause) for s in ordered))
    colour = dict(zip(causes, itertools.cycle(CAUSE_COLOURS), strict=False))
    figure = Figure(figsize=(9, 1.2 + 0.28 * len(ordered)))
    axes = figure.add_subplot()
    for i, step in enumerate(ordered):
        change, low, high = (100 * (v - 1) for v in (step.effect.ratio, step.effect.low, step.effect.high))
        axes.barh(i, change, color=colour[short(step.cause)], alpha=0.8)
        axes.errorbar(change, i, xerr=[[change - low], [high - change]], color="black", capsize=2, linewidth=1)
    labels = [f"{' '.join(p for p in s.series if p)} ({s.first_after.run_date:%m-%d})" for s in ordered]
    axes.set_yticks(range(len(ordered)), labels, fontsize=7)
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_xlabel("change at the step (%), with its interval")
    axes.set_title(f"Every step, by size{simulated_tag(s.first_after for s in ordered)}", fontsize=9)
    axes.grid(True, axis="x", alpha=0.3)
    handles = [Patch(color=colour[cause], alpha=0.8, label=cause) for cause in causes]
    axes.legend(
        handles=handles, fontsize=7, title="cause", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1)
    )
    return to_png(figure)


def series_chart(history: History, step: Step) -> bytes:
    """One series over time (median and its 95% interval), a marker per compiler version, the two
    windows the step was judged on shaded, and what changed there."""
    rows = history.rows
    figure = Figure(figsize=(8, 3.6))
    axes = figure.add_subplot()
    versions = list(dict.fromkeys(short(r.compiler_version or "unknown") for r in rows))
    for version, marker in zip(versions, itertools.cycle(MARKERS), strict=False):
        mine = [(i, r) for i, r in enumerate(rows) if short(r.compiler_version or "unknown") == version]
        median, bars = error_bars([r for _, r in mine])
        axes.errorbar([i for i, _ in mine], median, yerr=bars, fmt=marker, capsize=2, label=f"compiler {version}")
    first, cut, last = rows.index(step.before[0]), rows.index(step.first_after), rows.index(step.after[-1])
    axes.axvspan(first - 0.4, cut - 0.5, color="#1f77b4", alpha=0.08, label="before (tested)")
    axes.axvspan(cut - 0.5, last + 0.4, color="#d62728", alpha=0.08, label="after (tested)")
    axes.axvline(cut - 0.5, color="#d62728", linestyle="--")
    axes.set_xlabel(f"run # (oldest first; {rows[0].run_date} to {rows[-1].run_date})")
    axes.set_title(
        f"{' '.join(p for p in history.series if p)}{simulated_tag(rows)}: {step.effect.change:+.1%} on "
        f"{step.first_after.run_date}, {short(step.cause)}",
        fontsize=8,
    )
    axes.set_ylabel("latency (us): median, 95% CI")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="upper left")
    return to_png(figure)
