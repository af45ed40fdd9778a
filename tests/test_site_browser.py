"""The results site of a simulated fleet's nights, opened from its folder in Debian's chromium
(Playwright, no browser download) with every request that is not file:// blocked and counted: the
overview lists the open regression the data holds, its kernel page's chart marks the step with its
cause, a click on a point reaches that row's lineage; filters, zoom and hover work; nothing leaves
the machine. The nights are the compiler-upgrade dataset the report tests build (tests/report_data.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from report_data import FIRST_NIGHT, SAME_VERSION_NIGHTS, SLOWED, Nights, cached

from kernelsweep.results import reader
from kernelsweep.site.build import build_site

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("nights")]  # one process builds or reads the dataset

UPGRADE_NIGHT = FIRST_NIGHT + timedelta(days=SAME_VERSION_NIGHTS)
PREFECT_UI = "http://127.0.0.1:4200"


@pytest.fixture(scope="module")
def nights(request, tmp_path_factory) -> Nights:
    return cached(request.config, "compiler-upgrade-nights", Nights.compiler_upgrade, tmp_path_factory.mktemp("nights"))


def test_the_site_shows_the_open_regression_its_step_and_a_points_lineage_offline(nights, tmp_path):
    from playwright.sync_api import sync_playwright

    site = tmp_path / "site"
    build_site(nights.results, str(site), prefect_ui=PREFECT_UI)
    outside: list[str] = []
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])  # fmt: skip
        try:
            context = browser.new_context(viewport={"width": 1300, "height": 900})
            context.route("**/*", lambda route: _local_only(route, outside))
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((site / "index.html").as_uri())
            opened = page.locator("tr.regression.open")
            assert opened.count() == 1
            row = opened.inner_text()
            assert SLOWED.kernel in row and SLOWED.shape in row and UPGRADE_NIGHT.isoformat() in row
            assert "compiler" in row and "open" in row

            opened.locator("a").nth(1).click()  # its series, on its kernel's page
            page.wait_for_selector(".series .step-marker")
            [series] = page.locator(".series").all()  # the link shows that series alone
            marker = series.locator(".step-marker")
            assert marker.count() == 1 and marker.get_attribute("data-night") == UPGRADE_NIGHT.isoformat()
            assert "compiler" in marker.get_attribute("data-cause") and "compiler" in marker.inner_text()
            plot = series.locator(".u-over").bounding_box()
            mark = marker.bounding_box()
            assert plot and mark and plot["x"] < mark["x"] < plot["x"] + plot["width"]

            page.mouse.move(mark["x"] + 1, plot["y"] + plot["height"] / 2)  # the first run after the step
            tip = series.locator(".tip").inner_text()
            assert "median" in tip and "interval [" in tip
            page.mouse.click(mark["x"] + 1, plot["y"] + plot["height"] / 2)
            page.wait_for_selector("tr.artifact")
            lineage = page.inner_text("#lineage")
            row_id = lineage.split("row id\t", 1)[1].split("\n", 1)[0]
            stored = reader.read(nights.results).to_pylist()
            [point] = [r for r in stored if r["row_id"] == row_id]
            assert (point["kernel"], point["shape"], point["run_date"]) == (SLOWED.kernel, SLOWED.shape, UPGRADE_NIGHT)
            assert point["neff_uri"] in lineage and point["compiler_version"] in lineage
            flow_run = page.locator("a.flow-run")
            assert flow_run.get_attribute("href") == f"{PREFECT_UI}/runs/flow-run/{point['flow_run_id']}"

            page.goto((site / f"kernel-{SLOWED.kernel}.html").as_uri())
            page.wait_for_selector(".series")
            shown = page.locator(".series").count()
            page.select_option("#f-shape", SLOWED.shape)  # a filter keeps that shape's series only
            assert page.locator(".series").count() < shown
            before = page.evaluate("() => document.querySelector('.series').chart.scales.x.min")
            plot = page.locator(".series .u-over").first.bounding_box()
            assert plot
            page.mouse.move(plot["x"] + plot["width"] * 0.3, plot["y"] + 20)
            page.mouse.down()
            page.mouse.move(plot["x"] + plot["width"] * 0.7, plot["y"] + 20, steps=5)
            page.mouse.up()
            assert page.evaluate("() => document.querySelector('.series').chart.scales.x.min") > before  # zoomed

            first, last = nights.runs[0], nights.runs[-1]  # across the upgrade: the slowed shape's intervals apart
            page.goto(f"{(site / 'compare.html').as_uri()}?k={SLOWED.kernel}&a={first}&b={last}")
            page.wait_for_selector("#rows tr")
            compared = {r.split("\t")[0].split()[0]: r.split("\t") for r in page.locator("#rows tr").all_inner_texts()}
            slowed = compared[SLOWED.shape]
            assert 1.15 < float(slowed[3]) < 1.25 and slowed[4] == "slower" and len(compared) == 2
        finally:
            browser.close()
    assert errors == [] and outside == []


def _local_only(route, outside: list[str]) -> None:
    """Only the site's own files load; anything else is counted and refused."""
    if route.request.url.startswith("file://"):
        route.continue_()
    else:
        outside.append(route.request.url)
        route.abort()
