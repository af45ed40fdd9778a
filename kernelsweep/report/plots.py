"""The report's charts as PNG bytes, drawn with matplotlib's Agg canvas (no display, no pyplot state,
so a flow's threads can draw at once).

Latency against shape per kernel, the roofline per platform, the share of peak across platforms on
one normalised roof, and each regressed series over time with its step marked.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kernelsweep.platforms import PLATFORMS
from kernelsweep.report.load import ReportRow
from kernelsweep.report.normalise import normalise
from kernelsweep.report.regress import History, Step

PLATFORM_COLOURS = {"trn1": "#1f77b4", "trn2": "#d62728", "inf2": "#2ca02c"}
# trn1 and inf2 share a NeuronCore generation and often land on the same spot: inf2 is drawn as a
# larger open marker around the others, so neither hides the other
PLATFORM_MARKS = {"inf2": {"s": 110, "facecolors": "none", "linewidths": 1.5}}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 110


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})  # no version stamp: stable bytes
    return buffer.getvalue()


def _colour(platform: str) -> str:
    return PLATFORM_COLOURS.get(platform, "#7f7f7f")


def _mark(platform: str) -> dict:
    return {"edgecolors": _colour(platform), "facecolors": _colour(platform), **PLATFORM_MARKS.get(platform, {})}


def _simulated(results: Iterable[ReportRow]) -> str:
    return " (simulated)" if any(r.is_simulation for r in results) else ""


def latency_by_shape(latest: list[ReportRow]) -> dict[str, bytes]:
    """One chart per kernel: median latency per shape (ordered by FLOPs), min-max bars, a line per
    platform and dtype."""
    charts = {}
    for kernel in sorted({r.kernel for r in latest}):
        rows = [r for r in latest if r.kernel == kernel and r.ok]
        if not rows:
            continue
        shapes = sorted({r.shape for r in rows}, key=lambda s: (_flops(rows, s), s))
        figure = Figure(figsize=(8, 4.5))
        axes = figure.add_subplot()
        for (platform, dtype), marker in zip(sorted({(r.platform, r.dtype) for r in rows}), itertools.cycle(MARKERS)):
            line = sorted((shapes.index(r.shape), r) for r in rows if (r.platform, r.dtype) == (platform, dtype))
            median, spread = _error_bars([r for _, r in line])
            axes.errorbar(
                [i for i, _ in line],
                median,
                yerr=spread,
                marker=marker,
                capsize=3,
                color=_colour(platform),
                label=f"{platform} {dtype}",
            )
        axes.set_xticks(range(len(shapes)), shapes, rotation=20, ha="right", fontsize=8)
        axes.set_ylabel("latency (us): median, min-max of repeats")
        latencies = [r.latency_us for r in rows if r.latency_us]
        if latencies and max(latencies) > 20 * min(latencies):
            axes.set_yscale("log")
        axes.set_title(f"{kernel}: latency by shape{_simulated(rows)}")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
        charts[kernel] = _png(figure)
    return charts


def _error_bars(rows: list[ReportRow]) -> tuple[list[float], list[list[float]]]:
    """Medians, and their distances down to the fastest and up to the slowest repeat."""
    median = [r.latency_us or 0.0 for r in rows]
    low = [m - (r.latency_min_us if r.latency_min_us is not None else m) for m, r in zip(median, rows, strict=True)]
    high = [(r.latency_max_us if r.latency_max_us is not None else m) - m for m, r in zip(median, rows, strict=True)]
    return median, [low, high]


def _flops(rows: list[ReportRow], shape: str) -> int:
    return max((r.cost_flops or 0) for r in rows if r.shape == shape)


def roofline(latest: list[ReportRow]) -> bytes:
    """Achieved TFLOPS against arithmetic intensity under each platform's compute and HBM roofs
    (per dtype and LNC present), one marker per point: colour is the platform, shape the kernel."""
    points = [(i, t, r) for r in latest if r.ok and (i := normalise(r).intensity) and (t := r.achieved_tflops)]
    figure = Figure(figsize=(8, 5.5))
    axes = figure.add_subplot()
    intensities = [i for i, _, _ in points]
    low, high = (min(intensities) / 4, max(intensities) * 4) if intensities else (0.1, 1000.0)
    for platform_name, dtype, lnc in sorted({(r.platform, r.dtype, r.lnc or 1) for _, _, r in points}):
        platform = PLATFORMS.get(platform_name)
        if platform is None or dtype not in platform.peak_tflops:
            continue
        peak, bandwidth = platform.peak_flops(dtype, lnc) / 1e12, platform.hbm_bandwidth(lnc) / 1e12
        xs = _log_range(low, high)
        axes.plot(
            xs,
            [min(peak, bandwidth * x) for x in xs],
            color=_colour(platform_name),
            linestyle="--",
            linewidth=1,
            label=f"{platform_name} {dtype} LNC{lnc} roof: {peak:.0f} TFLOPS, {bandwidth * 1e3:.0f} GB/s",
        )
    markers = dict(zip(sorted({r.kernel for _, _, r in points}), itertools.cycle(MARKERS)))
    for intensity, tflops, r in points:
        axes.scatter(intensity, tflops, **_mark(r.platform), marker=markers[r.kernel], zorder=3)
    for kernel, marker in markers.items():
        axes.scatter([], [], color="black", marker=marker, label=kernel)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOPs per HBM byte, cost model)")
    axes.set_ylabel("achieved TFLOPS")
    axes.set_title(f"Roofline{_simulated(r for _, _, r in points)}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    return _png(figure)


def peak_share(latest: list[ReportRow]) -> bytes:
    """Every platform on one roof: intensity over each platform's own ridge point against % of its
    own compute peak; the roof is min(100%, 100% x relative intensity) for all of them."""
    figure = Figure(figsize=(8, 5))
    axes = figure.add_subplot()
    drawn = [
        (x, y, n.result)
        for n in map(normalise, (r for r in latest if r.ok))
        if (x := n.relative_intensity) and (y := n.compute_percent)
    ]
    xs = [x for x, _, _ in drawn]
    roof_x = _log_range(min(xs + [0.1]) / 4, max(xs + [10.0]) * 4)
    axes.plot(roof_x, [100 * min(1.0, x) for x in roof_x], color="black", linewidth=1, label="roof (every platform)")
    markers = dict(zip(sorted({r.kernel for _, _, r in drawn}), itertools.cycle(MARKERS)))
    for platform in sorted({r.platform for _, _, r in drawn}):
        for kernel, marker in markers.items():
            ours = [(x, y) for x, y, r in drawn if (r.platform, r.kernel) == (platform, kernel)]
            if ours:
                axes.scatter(
                    [x for x, _ in ours],
                    [y for _, y in ours],
                    **_mark(platform),
                    marker=marker,
                    label=f"{platform} {kernel}",
                    zorder=3,
                )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity / the platform's ridge point")
    axes.set_ylabel("% of the platform's compute peak")
    axes.set_title(f"Share of each platform's peak{_simulated(r for _, _, r in drawn)}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    return _png(figure)


def _log_range(low: float, high: float, steps: int = 100) -> list[float]:
    return [low * (high / low) ** (i / steps) for i in range(steps + 1)]


def series_chart(history: History, step: Step) -> bytes:
    """One series over time (median, min-max of repeats), coloured by compiler version, with the
    step marked and what changed there."""
    rows = history.rows
    figure = Figure(figsize=(8, 4))
    axes = figure.add_subplot()
    versions = list(dict.fromkeys(r.compiler_version or "unknown" for r in rows))
    for version, marker in zip(versions, itertools.cycle(MARKERS)):
        mine = [(i, r) for i, r in enumerate(rows) if (r.compiler_version or "unknown") == version]
        median, spread = _error_bars([r for _, r in mine])
        axes.errorbar(
            [i for i, _ in mine],
            median,
            yerr=spread,
            fmt=marker,
            capsize=2,
            label=f"compiler {version}",
        )
    axes.axvline(rows.index(step.after) - 0.5, color="#d62728", linestyle="--", label="step")
    ticks = list(range(0, len(rows), max(1, len(rows) // 10)))
    axes.set_xticks(ticks, [_when(rows, i) for i in ticks], rotation=20, ha="right", fontsize=8)
    kernel, shape, dtype, platform = history.series
    axes.set_title(
        f"{kernel} {shape} {dtype} {platform}{_simulated(rows)}\n"
        f"{step.shift.change:+.1%} on {step.after.run_date}: {step.cause}",
        fontsize=8,
    )
    axes.set_ylabel("latency (us)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="upper left")
    return _png(figure)


def _when(rows: list[ReportRow], i: int) -> str:
    """The run's date, or its start time where several runs share a date."""
    row = rows[i]
    if sum(r.run_date == row.run_date for r in rows) > 1 and row.started_at:
        return f"{row.started_at:%m-%d %H:%M}"
    return row.run_date.isoformat()
