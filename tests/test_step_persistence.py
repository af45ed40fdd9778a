"""A step nothing in the rows explains (another host of the same type, firmware) stays in the report
until someone acts: the run-to-run noise is never pooled across it. Before, the runs after the step
joined the runs before it as one lineage, the "noise" became the step, and the report went green 7-14
nights later (review: 32/32 series flagged at T+7, 3/32 at T+14, 0/32 at T+20)."""

from __future__ import annotations

import importlib.util
import sys
from datetime import date, timedelta
from pathlib import Path

import numpy as np

from kernelsweep.report.regress import regressions, track

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("steps_benchmark", REPO / "benchmarks" / "steps.py")
assert _spec and _spec.loader
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench
_spec.loader.exec_module(bench)

BEFORE, SERIES = 20, 6


def test_a_ten_percent_step_without_a_lineage_change_is_still_flagged_thirty_nights_later():
    rng = np.random.default_rng(21)
    rows = bench.history(rng, SERIES, BEFORE + 31, 7, 0.005, SERIES, BEFORE, 0.10, lineage=False)
    for later in (0, 14, 30):
        shown = [r for r in rows if r.run_date <= date(2026, 1, 1) + timedelta(days=BEFORE + later)]
        steps = regressions(track(shown))

        assert len({s.series for s in steps}) == SERIES, f"T+{later}: {len(steps)} open"
        assert all(s.effect.change > 0.05 for s in steps)
