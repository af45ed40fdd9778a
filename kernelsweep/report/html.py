"""The report as one self-contained HTML page plus its charts as PNG files.

Every image is embedded in the page as a data: URI, so `index.html` alone opens anywhere (a
downloaded copy, an S3 object behind a presigned link, a CI artifact) with no network and no
relative links to resolve. It is the only copy of each chart: writing the PNGs next to it as well
doubled what a night's reports weigh (each `<img>` names its chart in `data-file`, for whoever
wants one out). Wide tables scroll inside the page.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from html import escape

from kernelsweep.report import heat, plots, plots_search, plots_steps
from kernelsweep.report.plots_speedup import speedup_charts
from kernelsweep.report.summary import SHORT_RUNS, Cell, Report

MAX_REGRESSION_CHARTS = 20  # the newest; the summary chart and the table show them all
INDEX = "index.html"
STYLE = (
    """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1800px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f0f0f0; position: sticky; top: 0; }
.banner { background: #fff3cd; border: 1px solid #e0c060; padding: 6px 10px; display: inline-block; }
.bad { color: #b00020; font-weight: bold; }
.method { color: #555; font-size: 13px; }
figure { display: inline-block; margin: 0 1em 1em 0; vertical-align: top; }
figure.half img { max-width: 48vw; }
img { max-width: 100%; border: 1px solid #ddd; }
"""
    + heat.STYLE
)


def bundle(report: Report) -> dict[str, bytes]:
    """File name -> bytes: `index.html`, its charts embedded."""
    charts: dict[str, tuple[str, bytes, tuple[str, ...]]] = {}  # file -> (caption, png, x labels)
    if report.lasting:  # blips have a table of their own
        charts["steps-summary.png"] = ("Every step slower, by size", plots_steps.steps_summary(report.lasting), ())
    for step in report.lasting[:MAX_REGRESSION_CHARTS]:
        history = next(h for h in report.histories if h.series == step.series)
        name = _file("regression", *step.series, step.first_after.run_date.isoformat())
        caption = f"{' '.join(p for p in step.series if p)}: step on {step.first_after.run_date}"
        charts[name] = (caption, plots_steps.series_chart(history, step), ())
    if report.latest:
        charts["peak-share.png"] = ("Share of each platform's peak", plots.peak_share(report.latest), ())
        charts["roofline.png"] = ("Roofline", plots.roofline(report.latest), ())
    for kernel, shapes in report.search_progress.items():
        png = plots_search.search_progress(kernel, shapes, report.is_simulation)
        charts[_file("search", kernel)] = (f"{kernel}: search progress (best so far per trial)", png, ())
    for kernel, chart in plots.latency_by_shape(report.latest).items():
        charts[_file("latency", kernel)] = (f"{kernel}: latency by shape", chart.png, chart.x_labels)
    for kernel, chart in speedup_charts(report.speedups).items():
        charts[_file("speedup", kernel)] = (f"{kernel}: speedup over its baseline", chart.png, chart.x_labels)
    return {INDEX: render(report, charts).encode()}


def render(report: Report, charts: dict[str, tuple[str, bytes, tuple[str, ...]]]) -> str:
    series = [c for c in charts if c.startswith("regression-")]
    latency = [c for c in charts if c.startswith("latency-")]
    search = [c for c in charts if c.startswith("search-")]
    speedup = [c for c in charts if c.startswith("speedup-")]
    parts = [
        page_head("kernelsweep report"),
        "<h1>kernelsweep report</h1>",
        f"<p>results <code>{escape(report.results_uri)}</code>; {escape(report.selection.describe())}; "
        f"generated {report.generated_at:%Y-%m-%d %H:%M} UTC; {len(report.latest)} points, "
        f"{len(report.failed)} failed, {len(report.incorrect)} incorrect, "
        f"{len(report.regressions)} regression step(s): {len(report.open_regressions)} open, "
        f"{len(report.blips)} one-night blip(s) that came back.</p>",
        f"<p class='method'>Steps found by change-point detection (PELT) and judged with {escape(report.method)}.</p>",
    ]
    if report.is_simulation:
        parts.append("<p class='banner'>Simulated toolchain: these rows are not hardware measurements.</p>")
    parts += [
        "<h2>Regressions</h2>",
        *_short(report),
        table(report.regression_rows(report.lasting), empty="No series got slower.", bad=("change_percent",)),
        *(figure(name, *charts[name][:2]) for name in ("steps-summary.png",) if name in charts),
        *(figure(name, *charts[name][:2], css="half") for name in series),
        *_blips(report),
        "<h2>Drift against the selection's first runs</h2>",
        table(report.regression_rows(report.drifts), empty="No series drifted slower.", bad=("change_percent",)),
        "<h2>Failed or incorrect points</h2>",
        table(report.failure_rows(), empty="Every point's latest run succeeded with a correct output."),
        *_search_sections(report, charts, search),
        "<h2>Latest result per point</h2>",
        table(report.summary_rows()),
        "<h2>Across platforms: % of each platform's peak (roofline)</h2>",
        table(report.cross_rows()),
    ]
    parts += [figure(name, *charts[name][:2]) for name in ("peak-share.png", "roofline.png") if name in charts]
    parts.append("<h2>Latency by shape</h2>")
    parts += [figure(name, *charts[name]) for name in latency]
    if report.speedups:
        parts += ["<h2>Each kernel against its baseline (speedup = baseline / kernel latency)</h2>"]
        parts += [table(report.speedup_rows()), *(figure(name, *charts[name]) for name in speedup)]
    hot = heat.with_hotspots(report.latest)
    if hot:
        parts += ["<h2>Hot source lines (share of instruction time)</h2>", heat.section(hot)]
    parts.append("</body></html>")
    return "\n".join(parts)


def _short(report: Report) -> list[str]:
    """Where "no series got slower" cannot be said yet: series too short for a step to be judged."""
    if not report.short_series:
        return []
    return [
        f"<p class='bad'>{report.short_series} series have fewer than {SHORT_RUNS} runs: a step on them cannot be "
        "judged yet; compare their runs (kernelsweep compare --runs) instead.</p>"
    ]


def _blips(report: Report) -> list[str]:
    """The one-night excursions, apart: a ticket for each would be a ticket for noise or a bad host night."""
    if not report.blips:
        return []
    return ["<h3>One-night excursions that came back</h3>", table(report.regression_rows(report.blips))]


def _search_sections(
    report: Report, charts: dict[str, tuple[str, bytes, tuple[str, ...]]], names: list[str]
) -> list[str]:
    """The best configuration per shape with the search's progress, and the kernel x toolchain x LNC
    matrix; nothing when the results have neither."""
    parts = []
    if report.best:
        parts += ["<h2>Best configuration per shape</h2>", table(report.best_rows())]
        parts += [figure(name, *charts[name][:2]) for name in names]
    if report.matrix:
        parts += ["<h2>Kernel x toolchain x LNC</h2>", table(report.matrix)]
    return parts


def page_head(title: str) -> str:
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>"
    )


def figure(name: str, caption: str, png: bytes, x_labels: tuple[str, ...] = (), css: str = "") -> str:
    data = base64.b64encode(png).decode()
    x_axis = f" data-x='{escape(','.join(x_labels))}'" if x_labels else ""
    return (
        f"<figure class='{css}'><img src='data:image/png;base64,{data}' alt='{escape(caption)}' "
        f"data-file='{escape(name)}'{x_axis}><figcaption>{escape(caption)}</figcaption></figure>"
    )


def table(
    rows: Sequence[dict[str, Cell]],
    empty: str = "Nothing to show.",
    bad: tuple[str, ...] = (),
    bad_values: tuple[str, ...] = (),
) -> str:
    """An HTML table; cells of the `bad` columns are marked (only those holding one of `bad_values`, if given)."""
    if not rows:
        return f"<p>{escape(empty)}</p>"
    columns = list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for column in columns:
            value = row[column]
            number = isinstance(value, int | float) and not isinstance(value, bool)
            marked = column in bad and (not bad_values or value in bad_values)
            classes = " ".join(c for c in ("num" if number else "", "bad" if marked else "") if c)
            text = "-" if value is None else ("yes" if value is True else "NO" if value is False else str(value))
            cells.append(f"<td class='{classes}'>{escape(text)}</td>" if classes else f"<td>{escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def _file(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")[:150] + ".png"
