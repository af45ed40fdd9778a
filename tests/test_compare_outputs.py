"""compare and report on rows made directly (tests/report_rows.py): their outputs for machines and
reviews, correctness as a verdict, acknowledged steps, and the charts' shape order."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from markdown_it import MarkdownIt
from report_rows import nights, row, without_raw

from kernelsweep.errors import UsageError
from kernelsweep.report import formats, plots
from kernelsweep.report.acknowledge import load_acknowledged
from kernelsweep.report.compare import compare_runs, compare_versions
from kernelsweep.report.compare_page import bundle as compare_bundle
from kernelsweep.report.html import figure
from kernelsweep.report.load import latest
from kernelsweep.report.normalise import cross_platform
from kernelsweep.report.regress import regressions, track
from kernelsweep.report.summary import Report
from kernelsweep.report.triage import Statuses

REPO = Path(__file__).resolve().parent.parent
SHAPES = ["free_size=1", "free_size=2", "free_size=100", "free_size=200", "free_size=8192"]


@pytest.fixture(scope="module")
def upgraded():
    """12 nights of five shapes, 1% run-level noise; from night 10 one shape is 20% slower, one 5%."""
    rng = np.random.default_rng(3)
    step = {"free_size=8192": 1.2, "free_size=100": 1.05}
    return nights(rng, SHAPES, 12, run_noise=0.01, step=step, step_night=10)


def _report(rows, **kwargs) -> Report:
    from datetime import UTC, datetime

    from kernelsweep.report.load import Selection

    newest = latest(rows)
    histories = track(rows)
    platforms, cross = cross_platform(newest)
    return Report(
        "results", Selection(), datetime.now(UTC), newest, histories, regressions(histories), platforms, cross, **kwargs
    )


def test_compare_json_validates_against_its_documented_schema(upgraded):
    schema = json.loads((REPO / "docs" / "compare.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    for comparison in (
        compare_runs(upgraded, "run-009", "run-010"),
        compare_versions(upgraded, "compiler", "2.21", "2.22"),
    ):
        document = json.loads(json.dumps(formats.comparison_json(comparison)))
        Draft202012Validator(schema).validate(document)
        slowed = {p["key"]["shape"]: p for p in document["points"]}["free_size=8192"]
        assert slowed["outcome"] == "slower" and slowed["ci_low"] > 1.02 and document["exit_code"] == 1
        assert slowed["ratio"] == pytest.approx(slowed["b_us"] / slowed["a_us"])  # the table reproduces its ratio
    broken = dict(document, exit_code=2)
    assert list(Draft202012Validator(schema).iter_errors(broken))  # the schema says something


def test_report_json_validates_against_its_documented_schema(upgraded):
    schema = json.loads((REPO / "docs" / "report.schema.json").read_text())
    document = json.loads(json.dumps(formats.report_json(_report(upgraded))))
    Draft202012Validator(schema).validate(document)
    assert document["exit_code"] == 1 and document["open_regressions"] == 2


def test_markdown_renders_as_a_table(upgraded):
    comparison = compare_versions(upgraded, "compiler", "2.21", "2.22")
    html = MarkdownIt("commonmark").enable("table").render(formats.comparison_markdown(comparison))
    assert html.count("<table>") == 2  # the points, and the geometric means
    assert html.count("<tr>") == 1 + len(comparison.points) + 1 + 1  # header + points + header + one kernel
    assert "<strong>slower</strong>" in html and "Benjamini-Hochberg" in html


def test_each_compared_point_says_in_one_line_what_bounds_bs_row(upgraded):
    """Issue 25: compare shows B's bounding engine per point (markdown and JSON); rows before schema 3
    have none, and the cell stays empty rather than guessing."""
    why = "compute-bound on the Vector Engine (96.5% active)"
    rows = [replace(r, bound_why=why) if r.flow_run_id == "run-010" and r.shape != SHAPES[0] else r for r in upgraded]
    comparison = compare_runs(rows, "run-009", "run-010")
    assert [p.bound for p in comparison.points] == [None] + [why] * (len(SHAPES) - 1)
    assert [p["bound"] for p in formats.comparison_json(comparison)["points"]] == [None] + [why] * (len(SHAPES) - 1)
    markdown = formats.comparison_markdown(comparison)
    assert "bound (B)" in markdown and markdown.count(why) == len(SHAPES) - 1


def test_a_per_kernel_threshold_replaces_the_default_for_that_kernel_only(upgraded):
    """`--threshold vector_add=10%`: the 5% step is no longer a change that matters; the 20% one still is."""
    from kernelsweep.flows.cli.report import rule_from

    default = {p.key[1]: p.outcome for p in compare_versions(upgraded, "compiler", "2.21", "2.22").points}
    wider = compare_versions(upgraded, "compiler", "2.21", "2.22", rule_from(0.05, ("vector_add=10%",), "bh"))
    assert default["free_size=100"] == "slower" and default["free_size=8192"] == "slower"
    outcomes = {p.key[1]: p.outcome for p in wider.points}
    assert outcomes["free_size=100"] != "slower" and outcomes["free_size=8192"] == "slower"
    assert all(p.effect and p.effect.threshold == 0.10 for p in wider.points)
    other = rule_from(0.05, ("mlp=10%",), "bh")  # another kernel's threshold leaves vector_add at the default
    unchanged = compare_versions(upgraded, "compiler", "2.21", "2.22", other)
    assert {p.key[1]: p.outcome for p in unchanged.points} == default


def test_the_shapes_are_in_numeric_order_on_chart_axes_tables_and_comparisons(upgraded):
    chart = plots.latency_by_shape(latest(upgraded))["vector_add"]
    assert chart.x_labels == ("1", "2", "100", "200", "8192")  # as strings it would be 1, 100, 2, 200, 8192
    assert [p.key[1] for p in compare_runs(upgraded, "run-009", "run-010").points] == SHAPES
    assert "data-x='1,2,100,200,8192'" in figure("latency-vector-add.png", "latency", chart.png, chart.x_labels)


def test_an_incorrect_row_is_newly_incorrect_and_a_good_one_after_it_fixed():
    good = [row(shape=s, run="good", latencies=[100, 101, 99]) for s in SHAPES]
    zeros = "output outside tolerance: out is all zeros against a non-zero reference"
    bad = [row(shape=s, run="bad", night=1, latencies=[100, 101, 99]) for s in SHAPES]
    bad[1] = replace(
        bad[1], status="incorrect", error_stage="check", error_class="IncorrectOutput", error_message=zeros
    )
    forward = compare_runs(good + bad, "good", "bad")
    assert [p.key[1] for p in forward.points if p.outcome == "newly incorrect"] == [SHAPES[1]]
    assert forward.exit_code == 1 and "all zeros" in next(
        p.why for p in forward.points if p.outcome == "newly incorrect"
    )
    back = compare_runs(good + bad, "bad", "good")
    assert [p.outcome for p in back.points].count("fixed") == 1 and back.exit_code != 1


def test_the_report_exits_1_while_a_latest_row_is_incorrect_unless_allowed():
    rows = [row(shape=s, run="r", latencies=[100, 101, 99]) for s in SHAPES[:2]]
    rows[0] = replace(rows[0], status="incorrect", error_stage="check", error_message="output outside tolerance")
    report = _report(rows)
    assert report.incorrect and not report.failed
    assert report.exit_code() == 1 and report.exit_code(allow_incorrect=True) == 0
    assert report.failure_rows()[0]["status"] == "incorrect"


def test_an_acknowledged_step_stops_failing_the_report_and_is_shown(upgraded, tmp_path):
    report = _report(upgraded)
    assert {s.series[1] for s in report.open_regressions} == {"free_size=100", "free_size=8192"}
    ack = tmp_path / "acknowledged.toml"
    ack.write_text(
        '[[step]]\nkernel = "vector_add"\nshape = "free_size=8192"\nnight = 2026-03-11\nreason = "accepted: PERF-1"\n'
    )
    acknowledged = _report(upgraded, triage=Statuses(acknowledged=tuple(load_acknowledged(ack))))
    assert {s.series[1] for s in acknowledged.open_regressions} == {"free_size=100"}
    shown = {r["shape"]: r["acknowledged"] for r in acknowledged.regression_rows()}
    assert shown == {"free_size=8192": "accepted: PERF-1", "free_size=100": None}
    ack.write_text('[[step]]\nkernel = "vector_add"\n')
    with pytest.raises(UsageError, match="needs a reason"):
        load_acknowledged(ack)


def test_the_regression_table_reproduces_its_change_and_shows_the_corrected_p(upgraded):
    [slowed] = [r for r in _report(upgraded).regression_rows() if r["shape"] == "free_size=8192"]
    before, after = float(slowed["before_us"] or 0), float(slowed["after_us"] or 0)
    assert 100 * (after / before - 1) == pytest.approx(float(slowed["change_percent"] or 0), abs=0.06)
    assert (
        float(slowed["ci_low_percent"] or 0)
        < float(slowed["change_percent"] or 0)
        < float(slowed["ci_high_percent"] or 0)
    )
    assert 0 < float(slowed["p_adjusted"] or 1) <= 0.05 and "compiler 2.21 -> 2.22" in str(slowed["cause"])


def test_the_step_is_found_by_change_points_and_blamed_on_the_lineage(upgraded):
    steps = [s for h in track(upgraded) for s in h.steps]
    assert {(s.series[1], s.direction, str(s.first_after.run_date)) for s in steps} == {
        ("free_size=100", "slower", "2026-03-11"),
        ("free_size=8192", "slower", "2026-03-11"),
    }
    assert all(s.changes == {"compiler": ("2.21", "2.22")} for s in steps)


def test_old_rows_compare_on_their_summary_bound_and_the_output_says_so():
    rng = np.random.default_rng(1)
    rows = [without_raw(r) for r in nights(rng, SHAPES[:2], 2, repeats=7)]
    comparison = compare_runs(rows, "run-000", "run-001")
    assert any("schema 2" in note for note in comparison.notes)
    assert all("summaries" in (p.effect.method if p.effect else "") for p in comparison.points)


def test_the_compare_page_holds_its_chart_and_table(upgraded):
    files = compare_bundle(compare_versions(upgraded, "compiler", "2.21", "2.22"))
    page = files["index.html"].decode()
    assert set(files) == {"index.html"}  # the chart's one copy is embedded in the page
    assert (
        "data:image/png;base64,iVBORw0KGgo" in page
        and "data-file='compare.png'" in page
        and "B / A [CI]" in page
        and "slower" in page
    )


def test_the_roofline_draws_each_platforms_vector_engine_roof_once_per_lnc():
    """Issue 25: a Vector-Engine-bound kernel (seed 002) tops out under this roof, not the TensorE's; one
    dotted line per platform and LNC however many dtypes share it, at 128 lanes x the engine's clock."""
    from matplotlib.figure import Figure

    from kernelsweep.platforms import PLATFORMS

    axes, drawn = Figure().add_subplot(), set()
    xs = [0.01, 0.1, 10.0, 1000.0]
    for lnc in (1, 1, 2):  # a second dtype at LNC 1 draws nothing more
        plots._vector_ceiling(axes, PLATFORMS["trn2"], lnc, 2.9, xs, drawn)
    plots._vector_ceiling(axes, PLATFORMS["trn1"], 1, 0.8, xs, drawn)
    roofs = {line.get_label(): list(line.get_ydata()) for line in axes.lines}
    assert all(line.get_linestyle() == ":" for line in axes.lines) and len(axes.lines) == len(roofs) == 3
    trn2 = next(y for label, y in roofs.items() if label.startswith("trn2 LNC1 vector engine roof"))
    assert trn2[-1] == pytest.approx(128 * 0.96e9 / 1e12) and trn2[0] == pytest.approx(2.9 * 0.01)  # HBM, then flat
    lnc2 = next(y for label, y in roofs.items() if label.startswith("trn2 LNC2 vector engine roof"))
    assert lnc2[-1] == pytest.approx(2 * 128 * 0.96e9 / 1e12)
    assert PLATFORMS["trn3"].vector_peak_flops(1) is None  # no published clock: no roof drawn for it
