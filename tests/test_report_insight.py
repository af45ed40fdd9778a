"""What the report says about why and against what, on rows made by real simulated sweeps: a matmul
block against the stand-in nki-library kernel over three nights (paired rows, speedup per shape with
intervals), compiled with debug info and viewed as Parquet (hot source lines), rendered in chromium."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from inprocess_tools import standins_in_process
from report_data import chain
from stage_context import sim_context

from kernelsweep.report.html import bundle
from kernelsweep.report.publish import write_bundle
from kernelsweep.report.summary import Report, build_report
from kernelsweep.results.pairing import pair
from kernelsweep.results.rows import build_row
from kernelsweep.results.writer import write_results
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.load import parse_spec

pytestmark = pytest.mark.slow

STANDIN = "nkilib:kernelsweep.kernels.nki.nkilib_matmul:matmul_kernel"
NIGHTS = 3


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> tuple[str, list]:
    """(results, the last night's rows): three nights of two shapes and their baseline's twins."""
    root = tmp_path_factory.mktemp("insight")
    grid = {"M": [512], "K": [1024], "N": [1024, 2048]}
    block = {"kernel": "matmul", "grid": grid, "dtypes": ["bfloat16"], "baseline": STANDIN}
    points = expand_spec(parse_spec({"name": "insight", "platforms": ["trn2"], "kernels": [block]})).points
    results, rows = str(root / "results"), []
    for night in range(NIGHTS):
        ctx = sim_context(root, repeats=3, profile_format="parquet", env={"KERNELSWEEP_SIM_NOISE_SEED": "insight"})
        run = f"run-{night}"
        with standins_in_process():  # the rows feed the report's statistics: no assertion reads the tools' processes
            records = [chain(ctx, p) for p in points]
        versions = ctx.versions
        made = [build_row(r, flow_run_id=run, toolchain="sim", is_simulation=True, versions=versions) for r in records]
        rows = pair(made)
        day = datetime(2026, 5, 1 + night, tzinfo=UTC).date()
        write_results(rows, results, flow_run_id=run, run_date=day, lineage={"flow_run_id": run})
    return results, rows


def test_each_nights_rows_are_paired_with_the_profilers_latencies(nights):
    _, rows = nights
    assert [r.status for r in rows] == ["ok"] * 4 and all(r.correct for r in rows)
    for mine in (r for r in rows if not r.baseline_of):
        theirs = next(r for r in rows if r.baseline_of == "matmul" and r.shape == mine.shape)
        assert mine.baseline_ref == theirs.baseline_ref == STANDIN and theirs.kernel == "matmul.baseline"
        assert theirs.metrics["total_time_us"] == theirs.latency_median_us  # the profiler's, nothing else
        assert mine.speedup_vs_baseline == pytest.approx(theirs.latency_median_us / mine.latency_median_us)


def test_the_report_shows_the_speedup_per_shape_with_its_interval(nights):
    table = build_report(nights[0]).speedup_rows()
    assert [(r["kernel"], r["shape"]) for r in table] == [
        ("matmul", "M=512,K=1024,N=1024"),
        ("matmul", "M=512,K=1024,N=2048"),
    ]
    for entry in table:
        assert entry["baseline"] == STANDIN and entry["speedup"] > 1  # the LNC-aware kernel is faster
        assert entry["speedup_low"] < entry["speedup"] < entry["speedup_high"]
        assert entry["verdict"] == "faster" and "lies below" in entry["why"]


def test_the_html_report_renders_the_heat_view_and_the_speedups_in_chromium(nights, tmp_path):
    report = build_report(nights[0])
    page = Path(write_bundle(bundle(report), str(tmp_path / "html")))
    shown = _render(page, tmp_path / "report.png")
    assert shown["broken"] == [] and shown["overflow"] == []
    assert {"roofline.png", "speedup-matmul.png"} <= set(shown["files"])
    assert "Each kernel against its baseline" in shown["text"] and "Hot source lines" in shown["text"]
    assert "partly bound by the Tensor Engine" in shown["text"] or "compute-bound" in shown["text"]
    _heat_matches_the_rows(report, shown["heat"])


def _heat_matches_the_rows(report: Report, heat: list[dict]) -> None:
    """Every row with hotspots has its source shown, each hot line shaded with the share the row holds."""
    hot_rows = [r for r in report.latest if r.hotspots]
    assert hot_rows and len(heat) == len(hot_rows)
    source = Path("kernelsweep/kernels/nki/matmul.py").read_text().splitlines()
    for view in heat:
        row = next(r for r in hot_rows if view["kernel"] == f"{r.kernel} {r.shape} {r.dtype} {r.platform}")
        expected: dict[int, float] = {}
        for spot in row.hotspots or []:
            expected[int(spot["line"])] = expected.get(int(spot["line"]), 0.0) + float(spot["share_percent"])
        assert {int(k): v for k, v in view["shares"].items()} == pytest.approx(expected, abs=1e-3)
        assert view["lines"] > 20 and view["shaded"] == len(expected) and view["fits"]  # long lines scroll inside
        if row.kernel == "matmul":  # each engine's time lands on the lines that issue its instructions
            by_engine = {spot["engine"]: set() for spot in row.hotspots or []}
            for spot in row.hotspots or []:
                by_engine[spot["engine"]].add(source[int(spot["line"]) - 1])
            assert all("nisa.nc_matmul" in text for text in by_engine["tensor"]) and by_engine["tensor"]
            assert all("nisa.dma_copy" in text for text in by_engine["dma"]) and by_engine["dma"]


def _render(page: Path, screenshot: Path) -> dict:
    """Debian's chromium through Playwright: the images, the tables, and each heat view's hot lines."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.goto(page.as_uri())
            tab.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=60_000)
            images = tab.evaluate(
                "() => Array.from(document.images).map(i => ({file: i.dataset.file, width: i.naturalWidth}))"
            )
            overflow = tab.evaluate(
                "() => Array.from(document.querySelectorAll('table')).filter(t => t.getBoundingClientRect().right"
                " > document.documentElement.clientWidth && getComputedStyle(t.parentElement).overflowX !== 'auto')"
                ".map(t => t.innerText.slice(0, 40))"
            )
            heat = tab.evaluate(
                "() => Array.from(document.querySelectorAll('.heat')).map(v => ({kernel: v.dataset.kernel,"
                " lines: v.children.length, shaded: v.querySelectorAll('.hot').length,"
                " fits: v.getBoundingClientRect().right <= document.documentElement.clientWidth,"
                " shares: Object.fromEntries(Array.from(v.querySelectorAll('.hot'))"
                ".filter(d => getComputedStyle(d).backgroundColor !== 'rgba(0, 0, 0, 0)')"
                ".map(d => [d.dataset.line, parseFloat(d.dataset.share)]))}))"
            )
            tab.screenshot(path=str(screenshot), full_page=True)
            text = tab.inner_text("body")
        finally:
            browser.close()
    return {
        "files": [i["file"] for i in images],
        "broken": [i["file"] for i in images if not i["width"]],
        "overflow": overflow,
        "heat": heat,
        "text": text,
    }
