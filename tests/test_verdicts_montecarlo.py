"""The verdict rule under run-level noise, by Monte Carlo through the real verdict code (the prior
the points lend each other, `compare.judge`, confirmation of suspects): benchmarks/verdicts.py
draws the sweeps as the simulator does and prints docs/reports.md's tables.

The cases teams meet: one point among 500 moved, nothing moved with or without history, and a
shift every point of a run took.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("verdicts_benchmark", REPO / "benchmarks" / "verdicts.py")
assert _spec and _spec.loader
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclass looks its module up
_spec.loader.exec_module(bench)


def test_a_lone_ten_percent_among_500_points_is_called_once_its_suspicion_is_confirmed():
    """1% run noise, 7 repeats: the lone point passes the family's screen or is confirmed by one more
    run a side; without the prior and with the repeats' floor it was never called (0%)."""
    share, extra = bench.lone(11, 40, 500, 7, 0.01, 0.10, confirm=True)
    assert share >= 0.90
    assert 0 < extra <= 2 * 7 * 4  # a handful of suspects re-measured, not the sweep
    alone, _ = bench.lone(12, 40, 500, 7, 0.01, 0.10, confirm=False)
    assert 0.5 <= alone <= share  # the family alone finds most of them; confirmation the rest


@pytest.mark.parametrize("history", [True, False])
def test_an_unchanged_sweep_is_almost_never_called_slower_first_compare_included(history):
    found = bench.unchanged(13, 30, 500, 7, 0.01, history=history, confirm=True)
    assert found["points slower"] <= 0.0001 and found["exit 1"] <= 0.04  # 0 of 30 expected
    unconfirmed = bench.unchanged(14, 30, 36, 7, 0.01, history=history, confirm=False)
    assert unconfirmed["exit 1"] <= 0.04


def test_a_shift_the_whole_run_took_is_not_a_regression_on_a_first_compare():
    """3% on every point of B's run: a first compare cannot tell it from a change, so it calls none."""
    rng = np.random.default_rng(15)
    drawn = [bench.compare_once(rng, np.full(36, 0.03), 7, 0.005, history=False) for _ in range(20)]
    assert all(d.exit_code != 1 for d in drawn)


def test_the_documented_tables_are_this_benchmarks():
    text = (REPO / "docs" / "reports.md").read_text()
    assert "python benchmarks/verdicts.py" in text
    assert "One changed point among 1 / 36 / 500" in text and "Nothing changed, one run a side" in text
