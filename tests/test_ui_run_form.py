"""A sweep started from the Prefect UI's typed run form, in a real browser (Debian's chromium driven by
Playwright, no browser download) against a real server, run by a real worker of the family."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from prefect_server import poll, sim_host_env

from kernelsweep.results import reader

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet")]  # the session's one fleet server

CHROMIUM = "/usr/bin/chromium"
SUBMITS = 3
PROPERTY = "xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' schema-form-property ')][1]"


def _options(page, field) -> list[str]:
    """A select's choices: the keyboard opens its list (as a user tabbing through the form would)."""
    field.locator("button.p-select-button__control").focus()
    page.keyboard.press("ArrowDown")
    options = page.locator(".p-select-option")
    options.first.wait_for()
    texts = options.all_inner_texts()
    page.keyboard.press("Escape")
    return texts


def _fill_form(page, form: str, results: Path, artifacts: Path, shot: Path | None) -> None:
    """Open the run form, check what it offers, and fill it; `shot`: where to keep a picture of its top."""

    def field(label: str, nth: int = 0):
        name = page.locator(".schema-form-property__label", has_text=re.compile(f"^{re.escape(label)}$"))
        return name.nth(nth).locator(PROPERTY)

    page.goto(form)
    field("Name").wait_for(timeout=60_000)
    page.wait_for_load_state("networkidle", timeout=90_000)  # the form holds its defaults, not a spinner
    assert _options(page, field("Platforms")) == ["trn1", "trn2", "inf2", "trn3"]  # a multi-select
    assert _options(page, field("Kernel")) == ["mlp", "matmul", "vector_add", "custom"]
    assert field("Custom Kernel (Optional)").locator("textarea").is_visible()  # free module:attribute
    assert field("Axis").locator("textarea").input_value() == "n"  # the grid, one typed axis at a time
    values = field("Values")
    values.get_by_role("button", name="Add item").click()
    values.locator("input[type=number]").nth(1).fill("4096")
    field("Results (Optional)").locator("textarea").fill(str(results))
    field("Artifacts (Optional)").locator("textarea").fill(str(artifacts))
    assert "Executions per capture" in field("Num Exec (Optional)").inner_text()  # descriptions are shown
    if shot is not None:
        field("Name").evaluate("element => element.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(shot))  # the form's top: platforms, kernels, grid


def _confirmed(page) -> bool:
    """The UI's answer to a submit: its confirmation (True) or its "Something went wrong" (False). On
    two loaded cores the UI has once failed a create with nothing in the shared SQLite server's log
    (which was logging "database is locked" for its many workers' heartbeats); submitting again is
    what a user does."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    confirmed, oops = page.get_by_text("scheduled to start").first, page.get_by_text("Something went wrong").first
    try:
        confirmed.or_(oops).wait_for(timeout=120_000)
    except PlaywrightTimeout as timeout:
        shown = " ".join(page.locator("body").inner_text().split())[:300]
        raise AssertionError(f"the UI neither confirmed the run nor failed; it shows: {shown}") from timeout
    return confirmed.is_visible()


def _new_run(server, deployment_id: str, before: set[str]) -> str | None:
    """The run the form created (not one the nightly schedule planned meanwhile)."""
    runs = server.flow_runs(deployment_id={"any_": [deployment_id]})
    return next((r["id"] for r in runs if r["id"] not in before and not r["auto_scheduled"]), None)


def test_a_sweep_started_from_the_typed_run_form_completes(fleet_server, tmp_path):
    from playwright.sync_api import sync_playwright

    assert shutil.which(CHROMIUM), "Debian's chromium is missing: `apt-get install chromium` (.ci/run installs it)"
    server = fleet_server
    worker = server.start_worker("ui-trn2", "kernelsweep-trn2", env=sim_host_env(tmp_path / "host", "trn2"))
    try:
        server.wait_online("ui-trn2", "kernelsweep-trn2")
        deployment = server.api("/deployments/name/sweep/trn2")
        results, artifacts = tmp_path / "results", tmp_path / "artifacts"
        form = f"{server.ui_url}/deployments/deployment/{deployment['id']}/run"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            page = browser.new_page(viewport={"width": 1280, "height": 1800})
            before = {run["id"] for run in server.flow_runs(deployment_id={"any_": [deployment["id"]]})}
            for attempt in range(SUBMITS):
                _fill_form(page, form, results, artifacts, shot=None if attempt else tmp_path / "run-form.png")
                page.get_by_role("button", name="Submit").click()
                if _confirmed(page):
                    break
            else:
                raise AssertionError(f"the UI failed to create the run {SUBMITS} times")
            flow_run_id = poll(
                lambda: _new_run(server, deployment["id"], before), timeout=180, what="the submitted run"
            )
            browser.close()

        run = server.wait_final(flow_run_id, 600)
        assert run["state"]["type"] == "COMPLETED", run["state"]["message"]
        spec = run["parameters"]["spec"]
        assert spec["kernels"][0]["grid"] == [{"axis": "n", "values": [2048, 4096]}] and spec["results"] == str(results)
        rows = reader.read(str(results), columns=["shape", "platform", "status", "flow_run_id"]).to_pylist()
        assert sorted(r["shape"].split(",")[0] for r in rows) == ["n=2048", "n=4096"]
        assert {(r["platform"], r["status"], r["flow_run_id"]) for r in rows} == {("trn2", "ok", flow_run_id)}
    finally:
        worker.stop()
