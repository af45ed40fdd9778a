"""The compare page names its points, draws the incorrect ones, colours by verdict (only what
regressed is red) and says its verdict in a headline."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
from report_rows import nights

from kernelsweep.report.compare import compare_versions
from kernelsweep.report.compare_page import bundle, chart, label, shown

SHAPES = ["free_size=1", "free_size=2", "free_size=100", "free_size=200", "free_size=8192"]


def _comparison():
    rng = np.random.default_rng(3)
    rows = nights(rng, SHAPES, 12, run_noise=0.01, step={"free_size=8192": 1.2, "free_size=100": 1.05}, step_night=10)
    newest = next(r for r in rows if r.flow_run_id == "run-011" and r.shape == "free_size=2")
    wrong = replace(newest, status="incorrect", correct=False, error_stage="check", error_message="all zeros")
    return compare_versions([wrong if r.row_id == newest.row_id else r for r in rows], "compiler", "2.21", "2.22")


def test_the_chart_labels_every_point_and_draws_the_incorrect_one():
    c = _comparison()
    drawn = shown(c)
    assert {p.key for p in drawn} == {p.key for p in c.points}  # the incorrect point is on the chart
    assert drawn[0].outcome == "newly incorrect" and drawn[0].effect is None
    assert label(c, drawn[-1]) == "vector_add free_size=8192 float32 trn2"  # the largest change, named
    assert chart(c).startswith(b"\x89PNG")


def test_only_regressed_verdicts_are_marked_and_the_headline_says_the_exit_code():
    c = _comparison()
    page = bundle(c)["index.html"].decode()
    marked = re.findall(r"<td class='bad'>([^<]*)</td>", page)
    assert sorted(marked) == sorted(p.outcome for p in c.points if p.outcome in ("slower", "newly incorrect"))
    assert "inconclusive" not in marked and "same" not in marked
    assert re.search(r"<h2>Exit 1 \(regression\): 2 slower, 1 newly incorrect, .* of 5 points\.</h2>", page)
