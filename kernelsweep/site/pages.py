"""The site's HTML: the overview rendered whole here, and the shells of the kernel, compare and
lineage pages, whose content static/site.js draws from the data files beside them."""

from __future__ import annotations

import json
from html import escape
from importlib.resources import files
from typing import Any

STATIC = "static"
ASSETS = ("uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE.txt", "site.js", "site.css")
OVERVIEW, COMPARE, LINEAGE = "index.html", "compare.html", "lineage.html"
SIMULATED = "<p class='banner'>Simulated toolchain: these rows are not hardware measurements.</p>"


def assets() -> dict[str, bytes]:
    """The scripts and styles every page loads, shipped in the package (no CDN: the site opens offline)."""
    folder = files("kernelsweep.site").joinpath(STATIC)
    return {f"{STATIC}/{name}": folder.joinpath(name).read_bytes() for name in ASSETS}


def _head(title: str, charts: bool = False) -> str:
    scripts = f'<script src="{STATIC}/uPlot.iife.min.js"></script><link rel="stylesheet" href="{STATIC}/uPlot.min.css">'
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<link rel="stylesheet" href="{STATIC}/site.css">{scripts if charts else ""}'
        f'<script src="{STATIC}/site.js"></script></head><body>'
        f'<nav><a href="{OVERVIEW}">overview</a><a href="{COMPARE}">compare two runs</a></nav>'
    )


def _table(rows: list[dict[str, object]], classes: str = "") -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{escape(k)}</th>" for k in rows[0] if not k.startswith("_"))
    body = []
    for r in rows:
        cells = "".join(_cell(v) for k, v in r.items() if not k.startswith("_"))
        body.append(f"<tr class='{escape(str(r.get('_class', '')))}'>{cells}</tr>")
    return f"<div class='scroll'><table class='{classes}'><tr>{head}</tr>{''.join(body)}</table></div>"


def _cell(value: object) -> str:
    if isinstance(value, tuple):  # (text, link)
        return f"<td><a href='{escape(value[1])}'>{escape(value[0])}</a></td>"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"<td class='num'>{value}</td>"
    return f"<td>{'-' if value is None else escape(str(value))}</td>"


def overview(data: dict[str, Any], nightly_compare: str | None) -> str:
    """The overview: latest night, families, kernels, regressions (open first) with age and status."""
    kernels, regressions = data["kernels"], data["regressions"]
    order = {"open": 0, "acknowledged": 1, "fixed": 2, "recovered": 3, "blip": 4}
    listed = sorted(regressions, key=lambda r: (order.get(r["state"], 9), r["age_nights"]))
    regression_rows = [
        {
            "state": r["state"],
            "kernel": (r["kernel"], r["page"]),
            "series": (r["series"], f"{r['page']}#s{r['series_id']}"),
            "night": r["night"],
            "age (nights)": r["age_nights"],
            "change %": r["change"],
            "interval %": f"[{r['low']:+}, {r['high']:+}]",
            "cause": r["cause"],
            "note": r["note"],
            "_class": f"regression {r['state']}",
        }
        for r in listed
    ]
    kernel_rows = [
        {
            "kernel": (k["kernel"], k["page"]),
            "series": k["series"],
            "platforms": ", ".join(k["platforms"]),
            "latest night": k["latest_night"],
            "failed (latest)": k["failed"],
            "open regressions": k["open"],
            "_class": "open" if k["open"] else "",
        }
        for k in kernels
    ]
    opened = sum(r["state"] == "open" for r in regressions)
    latest = data["latest_run"] or "-"
    against = "the latest night against the one before"
    compare = f" <a href='{escape(nightly_compare)}'>{against}</a>." if nightly_compare else ""
    parts = [
        _head("kernelsweep results"),
        "<h1>kernelsweep results</h1>",
        SIMULATED if data["simulated"] else "",
        f"<p>results <code>{escape(str(data['results']))}</code>; built {escape(str(data['generated_at']))}.</p>",
        f"<h2>Latest night: {escape(str(data['latest_night']))}</h2>",
        f"<p>run <code>{escape(str(latest))}</code>: {data['latest_points']} point(s), "
        f"{data['latest_failed']} failed.{compare}</p>",
        "<h2>Families</h2>",
        _table([{"platform": f["platform"], "kernels": f["kernels"], "series": f["series"]} for f in data["families"]]),
        f"<h2 id='regressions'>Regressions: {opened} open of {len(regressions)}</h2>",
        _table(regression_rows, "regressions"),
        "<h2>Kernels</h2>",
        _table(kernel_rows, "kernels"),
        "</body></html>",
    ]
    return "\n".join(parts)


def kernel(name: str, data_file: str) -> str:
    return "\n".join(
        [
            _head(f"kernelsweep: {name}", charts=True),
            f"<h1>{escape(name)}</h1>",
            "<p>Each series' median per run with its 95% interval (band); dashed lines mark steps with their "
            "cause. Drag to zoom, double-click to reset, hover for a point's value, click it for its lineage.</p>",
            "<div id='filters'></div><p id='count'></p><div id='charts'></div><button id='more'>more series</button>",
            f'<script src="{escape(data_file)}"></script><script>kernelPage()</script>',
            "</body></html>",
        ]
    )


def compare(kernels: list[dict[str, str]], nightly_compare: str | None) -> str:
    listing = json.dumps(kernels).replace("</", "<\\/")
    nightly = (
        f"<p>The latest night against the one before, judged by the verdict rule: <a href='{escape(nightly_compare)}'>"
        "compare page</a>.</p>"
        if nightly_compare
        else ""
    )
    return "\n".join(
        [
            _head("kernelsweep: compare two runs", charts=False),
            "<h1>Compare two runs</h1>",
            nightly,
            "<p>Each series measured in both runs: its median with its 95% interval in A and in B, B / A, and "
            "whether the intervals are apart. Run-level noise and the family correction are left to "
            "<code>kernelsweep compare --runs A B</code>, which gives the verdict.</p>",
            "<p><label>kernel <select id='kernel'></select></label> <label>A <select id='a'></select></label> "
            "<label>B <select id='b'></select></label></p>",
            "<div class='scroll'><table><thead><tr><th>series</th><th>A</th><th>B</th><th>B / A</th>"
            "<th>intervals</th><th>lineage</th></tr></thead><tbody id='rows'></tbody></table></div>",
            "<p id='none' hidden>This kernel has no successful run to compare.</p>",
            f"<script type='application/json' id='kernels'>{listing}</script><script>comparePage()</script>",
            "</body></html>",
        ]
    )


def lineage() -> str:
    return "\n".join(
        [
            _head("kernelsweep: lineage"),
            "<h1 id='title'>lineage</h1><p><a id='back' href='index.html'>back to the series</a></p>",
            "<div id='lineage'>loading</div><script>lineagePage()</script>",
            "</body></html>",
        ]
    )
