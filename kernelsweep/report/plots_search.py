"""The search's progress chart: per kernel, the best latency found so far against the trial number, one
line per searched shape, with every trial's own latency as a faint dot (a failed trial is a cross
on the axis), so a reader sees whether the budget was enough: a line still falling at its last
trial would have found more."""

from __future__ import annotations

import itertools

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kernelsweep.report.plots import MARKERS, to_png

Trials = list[tuple[int, float | None]]  # (n-th configuration measured, latency in us, None when it failed)


def best_so_far(trials: Trials) -> list[tuple[int, float]]:
    """(trial, the lowest latency up to and including it), from the first trial that measured."""
    out, best = [], None
    for trial, latency in trials:
        if latency is not None and (best is None or latency < best):
            best = latency
        if best is not None:
            out.append((trial, best))
    return out


def search_progress(kernel: str, shapes: dict[str, Trials], simulated: bool) -> bytes:
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    colours = itertools.cycle(f"C{i}" for i in range(10))
    for (label, trials), marker, colour in zip(shapes.items(), itertools.cycle(MARKERS), colours, strict=False):
        measured = [(t, v) for t, v in trials if v is not None]
        axes.scatter([t for t, _ in measured], [v for _, v in measured], color=colour, alpha=0.25, s=14)
        failed = [t for t, v in trials if v is None]
        if failed and measured:
            low = min(v for _, v in measured)
            axes.scatter(failed, [low] * len(failed), color=colour, marker="x", alpha=0.5, s=14)
        steps = best_so_far(trials)
        axes.step([t for t, _ in steps], [v for _, v in steps], where="post", color=colour, marker=marker, label=label)
    axes.set_yscale("log")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("configurations measured (in the order the search proposed them)")
    axes.set_ylabel("latency (us): best so far (line), each trial (dots)")
    axes.set_title(f"{kernel}: search progress{' (simulated)' if simulated else ''}", fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    return to_png(figure)
