"""A compiler upgrade that makes one kernel 20% slower at one shape, found and blamed; twenty
same-version re-runs that raise no false alarm. All on rows made by real simulated sweeps, with the
simulator's default run-level noise (each night shifts each point by its own 1%): one run against
another can then rarely prove "same" within 2%, so the re-runs are judged by what must never happen
(a slower or faster call), not by a `same` the data cannot show.

The dataset (noise seeded, so built once and kept in pytest's cache until the code that makes it
changes): 21 nights with the default simulated compiler (a baseline and 20 re-runs of three points),
then two nights whose neuronx-cc reports a newer version and emits vector_add code 20% slower at
n=8192 only; the last night also runs mlp on trn1 and inf2 and a kernel that crashes on the device.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from report_data import ELSEWHERE, FIRST_NIGHT, NEW_COMPILER, POINTS, SAME_VERSION_NIGHTS, SLOWED, Nights, cached

from kernelsweep.report.compare import compare_runs, compare_versions
from kernelsweep.report.html import bundle
from kernelsweep.report.load import Selection, load
from kernelsweep.report.publish import write_bundle
from kernelsweep.report.regress import track
from kernelsweep.report.summary import build_report
from kernelsweep.sim import COMPILER_VERSION
from kernelsweep.sim.config import parse_slowdowns

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("nights")]  # one process builds or reads the dataset

UPGRADE_NIGHT = FIRST_NIGHT + timedelta(days=SAME_VERSION_NIGHTS)
OLD = COMPILER_VERSION.split("+")[0]
SLOWED_KEY = (SLOWED.kernel, SLOWED.shape, SLOWED.dtype, SLOWED.platform)
KEYS = {(p.kernel, p.shape, p.dtype, p.platform) for p in POINTS}


@pytest.fixture(scope="module")
def nights(request, tmp_path_factory) -> Nights:
    return cached(request.config, "compiler-upgrade-nights", Nights.compiler_upgrade, tmp_path_factory.mktemp("nights"))


def test_the_new_compiler_is_slower_at_the_slowed_shape_only(nights):
    comparison = compare_versions(load(nights.results), "compiler", OLD, NEW_COMPILER)
    verdicts = {p.key: p for p in comparison.points}
    slowed = verdicts[SLOWED_KEY]
    assert slowed.outcome == "slower" and slowed.effect is not None
    assert 0.17 < slowed.effect.change < 0.23  # the configured 1.2x, through the real capture and profile
    assert slowed.effect.low > 1.02 and "t on run levels" in slowed.effect.method  # 21 v 2 runs: runs are the unit
    assert {p.outcome for k, p in verdicts.items() if k != SLOWED_KEY} <= {"same", "inconclusive"}
    assert comparison.exit_code == 1
    assert len(slowed.a) == SAME_VERSION_NIGHTS and len(slowed.b) == 2  # each side pools its runs


def test_one_run_against_the_next_across_the_upgrade(nights):
    results = load(nights.results)
    before, after = nights.runs[SAME_VERSION_NIGHTS - 1], nights.runs[SAME_VERSION_NIGHTS]
    forward = compare_runs(results, before, after)
    outcomes = {p.key: p.outcome for p in forward.points}
    assert outcomes.pop(SLOWED_KEY) == "slower" and set(outcomes.values()) <= {"same", "inconclusive"}
    assert forward.exit_code == 1
    assert all("other run(s) of the series" in p.effect.method for p in forward.points if p.effect)  # history
    backward = compare_runs(results, after, before)
    assert {p.key: p.outcome for p in backward.points}[SLOWED_KEY] == "faster" and backward.exit_code != 1


def test_the_step_is_flagged_the_night_it_happened_and_blamed_on_the_compiler(nights):
    for until in (UPGRADE_NIGHT, UPGRADE_NIGHT + timedelta(days=1)):  # that night, and still one step a night later
        histories = track(load(nights.results, Selection(until=until)))
        steps = [s for h in histories for s in h.steps]
        assert len(steps) == 1, [(s.series, s.after.run_date, s.why) for s in steps]
        [step] = steps
        assert step.series == (*SLOWED_KEY, "")  # a series also names its variant (none here)
        assert step.direction == "slower" and step.first_after.run_date == UPGRADE_NIGHT
        assert step.changes == {"compiler": (COMPILER_VERSION, f"{NEW_COMPILER}+kernelsweep.sim")}
        assert step.cause.startswith("compiler ") and NEW_COMPILER in step.cause


def test_twenty_same_version_reruns_raise_no_false_alarm(nights):
    """Each night against the night before, as a nightly CI job compares (`--runs previous latest`).
    Not twenty nights against one fixed baseline: that is one draw of the baseline run's own shift
    looked at twenty times, and a baseline that ran 2% fast makes every later night look slower."""
    results = load(nights.results)
    seen: dict[str, int] = {}
    false_calls = []
    for before, after in itertools.pairwise(nights.runs[:SAME_VERSION_NIGHTS]):
        comparison = compare_runs(results, before, after)
        for p in comparison.points:
            seen[p.outcome] = seen.get(p.outcome, 0) + 1
        calls = [(after, p.key, p.outcome, p.why) for p in comparison.points if p.outcome in {"slower", "faster"}]
        false_calls += calls + ([(after, "exit 1")] if comparison.exit_code == 1 else [])
    # The dataset is one seeded draw, the same in every build and clone (a fresh CI clone once drew other
    # noise: the NEFF named the trace worker's temporary folder); this draw holds no false call. By
    # `python benchmarks/reruns.py` the rule itself makes one in 5.0% of draws of this design (3.2% a
    # `slower`), two in 0.2%: so one false `faster` is allowed, should a model change move the draw; a
    # false `slower` also exits 1, counts twice, and so is never allowed: it would fail a nightly.
    assert len(false_calls) <= 1, false_calls
    assert sum(seen.values()) == 20 * len(POINTS)
    same_version = load(nights.results, Selection(until=UPGRADE_NIGHT - timedelta(days=1)))
    assert [s for h in track(same_version) for s in h.steps] == []
    assert all(len(h.rows) == SAME_VERSION_NIGHTS for h in track(same_version))


def test_the_report_lists_latest_failures_regressions_and_platforms(nights):
    report = build_report(nights.results)
    assert len(report.latest) == len(POINTS) + len(ELSEWHERE)
    [failed] = report.failure_rows()
    assert failed["kernel"] == "crashes_on_device" and failed["stage"] == "capture" and failed["error"]
    [regression] = report.regression_rows()
    assert (regression["kernel"], regression["night"]) == ("vector_add", UPGRADE_NIGHT.isoformat())
    assert "compiler" in str(regression["cause"]) and 17 < float(regression["change_percent"] or 0) < 23
    mlp = next(r for r in report.cross_rows() if r["kernel"] == "mlp")
    assert report.platforms == ["inf2", "trn1", "trn2"]
    assert all(mlp[f"{p} us"] and 0 < float(mlp[f"{p} % peak"] or 0) < 100 for p in report.platforms)
    summary = {(r["kernel"], r["shape"], r["platform"]): r for r in report.summary_rows()}
    ok = summary[("mlp", POINTS[2].shape, "trn2")]
    assert ok["repeats"] == 7 and ok["median_low_us"] <= ok["median_us"] <= ok["median_high_us"]
    assert ok["correct"] is True
    assert report.open_regressions and report.failed and report.exit_code() == 1


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_compare_exit_codes_for_ci(nights, tmp_path):
    res = ("--results", nights.results)
    before, after = nights.runs[SAME_VERSION_NIGHTS - 1], nights.runs[SAME_VERSION_NIGHTS]
    regressed = _cli("compare", *res, "--versions", "compiler", OLD, NEW_COMPILER, cwd=tmp_path)
    assert regressed.returncode == 1, regressed.stderr
    assert "slower" in regressed.stdout and "exit 1: regression" in regressed.stdout
    assert "Benjamini-Hochberg at 0.05 over 3 point(s)" in regressed.stdout
    assert _cli("compare", *res, "--runs", nights.runs[0], nights.runs[5], cwd=tmp_path).returncode in (0, 3)
    # a significance level no 14 repeats can reach: the 20% shift is beyond the noise but unproven
    unproven = _cli("compare", *res, "--runs", before, after, "--alpha", "1e-9", cwd=tmp_path)
    assert unproven.returncode == 3 and "inconclusive" in unproven.stdout, unproven.stdout
    for bad, says in (
        (("--versions", "linker", "1", "2"), "the tool is one of"),
        (("--runs", "not-a-run", "latest"), "no flow run 'not-a-run'"),
        (("--kernels", "mlp", "vector_add"), "share no"),
        ((), "exactly one of"),
        (("--runs", "previous", "latest", "--threshold", "lots"), "--threshold lots"),
    ):
        done = _cli("compare", *res, *bad, cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1, done.stderr
    broken = tmp_path / "broken"
    (broken / "v1" / "platform=trn2" / "run_date=2026-03-01").mkdir(parents=True)
    (broken / "v1" / "platform=trn2" / "run_date=2026-03-01" / "run.parquet").write_bytes(b"not parquet")
    unreadable = _cli("compare", "--results", str(broken), "--runs", "previous", "latest", cwd=tmp_path)
    assert unreadable.returncode == 4 and "not a readable Parquet file" in unreadable.stderr


def test_report_cli_and_its_html_in_chromium(nights, tmp_path):
    html = tmp_path / "html"
    done = _cli("report", "--results", nights.results, "--html", str(html), cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # a failed point and an open regression
    assert "crashes_on_device" in done.stdout and "capture" in done.stdout and "compiler" in done.stdout
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in html.iterdir()) == ["index.html"]  # one copy of each chart: in the page
    shown = _render_in_chromium(html / "index.html", tmp_path / "report.png")
    pngs = sorted(shown["files"])  # every chart is on the page, embedded
    assert {"roofline.png", "peak-share.png", "steps-summary.png"} <= set(pngs)
    assert any(p.startswith("regression-") for p in pngs)
    assert shown["broken"] == [] and (tmp_path / "report.png").stat().st_size > 50_000
    assert "Regressions" in shown["text"] and "crashes_on_device" in shown["text"]
    assert shown["files"].index("steps-summary.png") < min(
        shown["files"].index(p) for p in pngs if p.startswith("regression-")
    )  # the summary of every step comes before the per-series charts
    x_axis = shown["x"]["latency-vector-add.png"].split(",")
    assert x_axis == ["8192", "16384"] == sorted(x_axis, key=int)  # numeric, not "16384" < "8192"
    assert shown["overflow"] == []  # every wide table scrolls inside the page


def test_compare_page_and_formats_through_the_cli(nights, tmp_path):
    page = tmp_path / "compare"
    done = _cli(
        "compare",
        "--results",
        nights.results,
        "--versions",
        "compiler",
        OLD,
        NEW_COMPILER,
        "--format",
        "markdown",
        "--html",
        str(page),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("### compiler") and "| **slower** |" in done.stdout
    shown = _render_in_chromium(page / "index.html", tmp_path / "compare.png")
    assert shown["files"] == ["compare.png"] and shown["broken"] == []
    assert "slower" in shown["text"] and "Benjamini-Hochberg" in shown["text"]
    as_json = _cli(
        "compare", "--results", nights.results, "--runs", "previous", "latest", "--format", "json", cwd=tmp_path
    )
    assert json.loads(as_json.stdout)["exit_code"] == as_json.returncode


def test_a_report_written_twice_to_one_folder_replaces_each_file_whole(nights, tmp_path):
    files = bundle(build_report(nights.results, Selection(kernels=("mlp",))))
    first = write_bundle(files, str(tmp_path / "r"))
    assert write_bundle(files, str(tmp_path / "r")) == first
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == sorted(files)  # no partial files left behind


def _render_in_chromium(page_path: Path, screenshot: Path) -> dict:
    """Debian's chromium through Playwright (no browser download): what loaded, what did not."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_path.as_uri())
            page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=60_000)
            images = page.evaluate(
                "() => Array.from(document.images)"
                ".map(i => ({file: i.dataset.file, width: i.naturalWidth, x: i.dataset.x}))"
            )
            overflow = page.evaluate(  # a table wider than the page must sit in a scrolling box
                "() => Array.from(document.querySelectorAll('table')).filter(t => t.getBoundingClientRect().right"
                " > document.documentElement.clientWidth && getComputedStyle(t.parentElement).overflowX !== 'auto')"
                ".map(t => t.innerText.slice(0, 40))"
            )
            page.screenshot(path=str(screenshot), full_page=True)
            text = page.inner_text("body")
        finally:
            browser.close()
    return {
        "files": [i["file"] for i in images],
        "broken": [i["file"] for i in images if not i["width"]],
        "x": {i["file"]: i["x"] for i in images if i["x"]},
        "overflow": overflow,
        "text": text,
    }


def test_the_slowdown_setting_is_parsed_strictly():
    [entry] = parse_slowdowns("vector_add/n=8192:1.2")
    assert entry.matches("vector_add", {"n": 8192, "partition_size": 128})
    assert not entry.matches("vector_add", {"n": 16384}) and not entry.matches("mlp", {"n": 8192})
    with pytest.raises(ValueError, match="KERNEL"):
        parse_slowdowns("vector_add/n=big:1.2")
