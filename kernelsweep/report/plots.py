"""The report's charts as PNG bytes, drawn with matplotlib's Agg canvas (no display, no pyplot state,
so a flow's threads can draw at once).

Latency against shape per kernel, the roofline per platform and the share of peak across platforms
on one normalised roof; the steps' charts are in plots_steps, the compare page's in compare_page.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kernelsweep.platforms import PLATFORMS, Platform
from kernelsweep.report.load import ReportRow
from kernelsweep.report.normalise import normalise
from kernelsweep.report.ranks import median_interval
from kernelsweep.sweepspec.shapes import shape_order

PLATFORM_COLOURS = {"trn1": "#1f77b4", "trn2": "#d62728", "inf2": "#2ca02c"}
# trn1 and inf2 share a NeuronCore generation and often land on the same spot: inf2 is drawn as a
# larger open marker around the others, so neither hides the other
PLATFORM_MARKS = {"inf2": {"s": 110, "facecolors": "none", "linewidths": 1.5}}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 110


def to_png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})  # no version stamp: stable bytes
    return buffer.getvalue()


def _colour(platform: str) -> str:
    return PLATFORM_COLOURS.get(platform, "#7f7f7f")


def _mark(platform: str) -> dict:
    return {"edgecolors": _colour(platform), "facecolors": _colour(platform), **PLATFORM_MARKS.get(platform, {})}


def simulated_tag(results: Iterable[ReportRow]) -> str:
    return " (simulated)" if any(r.is_simulation for r in results) else ""


@dataclass(frozen=True)
class Chart:
    png: bytes
    x_labels: tuple[str, ...] = ()  # the x axis's tick labels, left to right (the page exposes them)


def shape_axis(rows: list[ReportRow]) -> tuple[str | None, dict[str, str]]:
    """(the axis the x axis follows: the kernel axis with the most distinct values; for each shape,
    the rest of its varying axes, which name its line)."""
    parsed = {r.shape: dict(shape_order(r.shape)) for r in rows}
    axes = list(dict.fromkeys(axis for shape in parsed.values() for axis in shape))
    varying = [a for a in axes if len({shape.get(a) for shape in parsed.values()}) > 1]
    if not varying:
        return None, {shape: "" for shape in parsed}
    x = max(varying, key=lambda a: len({shape.get(a) for shape in parsed.values()}))
    rest = {s: ",".join(f"{a}={_int(v[a])}" for a in varying if a != x and a in v) for s, v in parsed.items()}
    return x, rest


def latency_by_shape(latest: list[ReportRow]) -> dict[str, Chart]:
    """One chart per kernel with more than one shape: median latency against the kernel's varying
    axis in numeric order (log 2 scale when it spans a wide range), one line per platform, dtype and
    other varying axes, each with its own marker and a small offset so none hides another; error
    bars are the 95% interval of each median (order statistics of the repeats)."""
    charts = {}
    for kernel in sorted({r.kernel for r in latest}):
        rows = [r for r in latest if r.kernel == kernel and r.ok]
        axis, rest = shape_axis(rows)
        if axis is None:
            continue  # one shape: the tables say it all
        charts[kernel] = _latency_chart(kernel, rows, axis, rest)
    return charts


def _latency_chart(kernel: str, rows: list[ReportRow], axis: str, rest: dict[str, str]) -> Chart:
    def x_of(r: ReportRow) -> float:
        return dict(shape_order(r.shape))[axis]

    values = sorted({x_of(r) for r in rows})
    wide = values[0] > 0 and values[-1] / values[0] > 8
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    lines = sorted({(r.platform, r.dtype, rest[r.shape]) for r in rows})
    for i, ((platform, dtype, other), marker) in enumerate(zip(lines, itertools.cycle(MARKERS), strict=False)):
        mine = sorted((r for r in rows if (r.platform, r.dtype, rest[r.shape]) == (platform, dtype, other)), key=x_of)
        nudge = i - (len(lines) - 1) / 2  # lines side by side around each x, never on top of each other
        xs = [x_of(r) * 1.03**nudge if wide else x_of(r) + 0.01 * (values[-1] - values[0]) * nudge for r in mine]
        median, bars = error_bars(mine)
        axes.errorbar(
            xs,
            median,
            yerr=bars,
            marker=marker,
            capsize=3,
            color=_colour(platform),
            markerfacecolor="none" if i % 2 else _colour(platform),
            alpha=0.85,
            label=f"{platform} {dtype}" + (f" {other}" if other else ""),
        )
    if wide:
        axes.set_xscale("log", base=2)
    labels = tuple(_int(v) for v in values)
    axes.set_xticks(values, labels, fontsize=8)
    axes.minorticks_off()
    axes.set_xlabel(axis)
    axes.set_ylabel("latency (us): median, 95% CI of the median")
    latencies = [r.latency_us for r in rows if r.latency_us]
    if latencies and max(latencies) > 20 * min(latencies):
        axes.set_yscale("log")
    fixed = ",".join(
        f"{a}={_int(v)}" for a, v in shape_order(rows[0].shape) if a != axis and f"{a}=" not in "".join(rest.values())
    )
    axes.set_title(f"{kernel} {fixed}: latency by {axis}{simulated_tag(rows)}", fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    return Chart(to_png(figure), labels)


def _int(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def error_bars(rows: list[ReportRow]) -> tuple[list[float], list[list[float]]]:
    """Medians, and their distances to the 95% interval of the median (none without raw repeats)."""
    median = [r.latency_us or 0.0 for r in rows]
    low, high = [], []
    for m, r in zip(median, rows, strict=True):
        lo, hi = median_interval(r.latencies_us, 0.95) if r.latencies_us else (m, m)
        low.append(max(0.0, m - lo))
        high.append(max(0.0, hi - m))
    return median, [low, high]


def roofline(latest: list[ReportRow]) -> bytes:
    """Achieved TFLOPS against arithmetic intensity under each platform's compute and HBM roofs
    (per dtype and LNC present), one marker per point: colour is the platform, shape the kernel."""
    points = [(i, t, r) for r in latest if r.ok and (i := normalise(r).intensity) and (t := r.achieved_tflops)]
    figure = Figure(figsize=(8, 5.5))
    axes = figure.add_subplot()
    intensities = [i for i, _, _ in points]
    drawn: set[tuple[str, int]] = set()
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
        _vector_ceiling(axes, platform, lnc, bandwidth, xs, drawn)
    markers = dict(zip(sorted({r.kernel for _, _, r in points}), itertools.cycle(MARKERS)))
    for intensity, tflops, r in points:
        axes.scatter(intensity, tflops, **_mark(r.platform), marker=markers[r.kernel], zorder=3)
    for kernel, marker in markers.items():
        axes.scatter([], [], color="black", marker=marker, label=kernel)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOPs per HBM byte, cost model)")
    axes.set_ylabel("achieved TFLOPS")
    axes.set_title(f"Roofline{simulated_tag(r for _, _, r in points)}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    return to_png(figure)


def _vector_ceiling(
    axes: Axes, platform: Platform, lnc: int, bandwidth: float, xs: list[float], drawn: set[tuple[str, int]]
) -> None:
    """The Vector Engine's roof (dotted), once per platform and LNC: element-wise kernels, which the
    TensorE's roof says nothing about, top out here (kernelsweep.profiles.bounding)."""
    vector = platform.vector_peak_flops(lnc)
    if vector is None or (platform.name, lnc) in drawn:
        return
    drawn.add((platform.name, lnc))
    axes.plot(
        xs,
        [min(vector / 1e12, bandwidth * x) for x in xs],
        color=_colour(platform.name),
        linestyle=":",
        linewidth=1,
        label=f"{platform.name} LNC{lnc} vector engine roof: {vector / 1e12:.2f} TFLOPS",
    )


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
    axes.set_title(f"Share of each platform's peak{simulated_tag(r for _, _, r in drawn)}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    return to_png(figure)


def _log_range(low: float, high: float, steps: int = 100) -> list[float]:
    return [low * (high / low) ** (i / steps) for i in range(steps + 1)]
