"""Every regression has a state and an age: open until it recovers (with the night) or is
acknowledged; a one-night excursion that came back is shown apart; a slow drift no single step shows
is flagged against the selection's first runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from jsonschema import Draft202012Validator
from report_rows import FIRST, row

from kernelsweep.report import formats
from kernelsweep.report.load import Selection, latest
from kernelsweep.report.normalise import cross_platform
from kernelsweep.report.regress import drifts, regressions, track
from kernelsweep.report.summary import Report

NIGHTS, RUN_NOISE = 30, 0.005
REPO = Path(__file__).resolve().parent.parent


def _rows(factors: dict[str, list[float]], seed: int = 5) -> list:
    """Series (one per shape) with a factor per night, 7 repeats, 1% jitter, a run shift per point."""
    rng = np.random.default_rng(seed)
    rows = []
    for night in range(NIGHTS):
        for i, (shape, factor) in enumerate(factors.items()):
            shift = 1 + RUN_NOISE * rng.standard_normal()
            values = 100 * (1 + i) * factor[night] * shift * (1 + 0.01 * rng.standard_normal(7))
            rows.append(row(shape=shape, run=f"run-{night:03d}", night=night, latencies=list(values)))
    return rows


def _report(rows) -> Report:
    histories = track(rows)
    platforms, cross = cross_platform(latest(rows))
    return Report(
        "results", Selection(), datetime.now(UTC), latest(rows), histories, regressions(histories), platforms, cross,
        drifts=drifts(histories),
    )  # fmt: skip


def _flat(**changes: tuple[int, int, float]) -> dict[str, list[float]]:
    """shape -> factor per night: `change` from night `start` up to (not including) `end`."""
    out = {"n=1": [1.0] * NIGHTS}
    for shape, (start, end, change) in changes.items():
        out[shape] = [1 + change if start <= t < end else 1.0 for t in range(NIGHTS)]
    return out


def test_open_recovered_and_one_night_regressions_have_their_state_age_and_night():
    report = _report(_rows(_flat(**{"n=2": (12, NIGHTS, 0.1), "n=3": (10, 16, 0.1), "n=4": (20, 21, 0.1)})))
    rows = {r["shape"]: r for r in report.regression_rows()}
    assert rows["n=2"]["state"] == "open" and rows["n=2"]["age_nights"] == NIGHTS - 1 - 12
    assert rows["n=3"]["state"] == "recovered" and rows["n=3"]["recovered_on"] == str(FIRST.replace(day=17))
    assert rows["n=4"]["state"] == "blip" and rows["n=4"]["recovered_on"] == str(FIRST.replace(day=22))
    assert [s.series[1] for s in report.open_regressions] == ["n=2"] and report.exit_code() == 1
    assert [s.series[1] for s in report.blips] == ["n=4"]
    assert "n=1" not in rows


def test_a_drift_to_ten_percent_over_twenty_nights_is_flagged_by_night_twenty():
    ramp = [1.0] * 10 + [1 + 0.005 * (t + 1) for t in range(20)]  # +0.5% a night from night 10: +10% on night 29
    rows = _rows({"n=1": [1.0] * NIGHTS, "n=2": ramp})
    report = _report(rows)
    assert [s.series[1] for s in report.drifts] == ["n=2"] and report.exit_code() == 1
    assert not report.open_regressions  # no single step says so: the drift is what flags it
    drift = report.drifts[0]
    assert drift.effect.change > 0.05 and drift.before[0].run_date == FIRST
    document = json.loads(json.dumps(formats.report_json(report)))
    assert [d["shape"] for d in document["drifts"]] == ["n=2"]
    Draft202012Validator(json.loads((REPO / "docs" / "report.schema.json").read_text())).validate(document)


def test_an_unchanged_history_has_no_drift():
    report = _report(_rows({"n=1": [1.0] * NIGHTS, "n=2": [1.0] * NIGHTS}, seed=6))
    assert not report.drifts and not report.regressions and report.exit_code() == 0


def test_the_page_lists_a_blip_apart_from_the_regressions():
    from kernelsweep.report.html import bundle

    report = _report(_rows(_flat(**{"n=2": (12, NIGHTS, 0.1), "n=4": (20, 21, 0.1)})))
    page = bundle(report)["index.html"].decode()
    regressions = page[page.index("<h2>Regressions</h2>") : page.index("One-night excursions that came back")]
    blips = page[page.index("One-night excursions that came back") : page.index("<h2>Drift")]
    assert "n=2" in regressions and "n=4" not in regressions
    assert "n=4" in blips and "blip" in blips
    assert "1 open, 1 one-night blip(s) that came back" in page


def test_a_short_history_says_its_steps_cannot_be_judged_yet():
    """Three runs: "No series got slower" would be the words of a quiet night; the page says why not."""
    from kernelsweep.report.html import bundle

    rows = [r for r in _rows(_flat(**{"n=2": (2, NIGHTS, 0.2)})) if r.run_date < FIRST.replace(day=4)]
    page = bundle(_report(rows))["index.html"].decode()
    assert "2 series have fewer than 4 runs: a step on them cannot be judged yet" in page
    long_enough = bundle(_report(_rows(_flat())))["index.html"].decode()
    assert "cannot be judged yet" not in long_enough
