"""A kernel that runs, is timed, and returns zeros (the simulator's `zeros` fault, as SDK 2.32 kernels
did in public reports) writes `incorrect` rows, never `ok`; compare of a good run against it says
`newly incorrect` on exactly those points and exits 1."""

from __future__ import annotations

import pytest
from report_data import POINTS, Nights

from kernelsweep.report.compare import compare_runs
from kernelsweep.report.load import load
from kernelsweep.results.reader import read

pytestmark = pytest.mark.slow


def test_a_zeros_kernel_writes_incorrect_rows_and_compare_calls_them_newly_incorrect(tmp_path):
    nights = Nights(tmp_path, repeats=3)
    good = nights.run()
    bad = nights.run(env={"KERNELSWEEP_SIM_FAULTS": "zeros=vector_add"})
    rows = {(r["kernel"], r["shape"], r["flow_run_id"]): r for r in read(nights.results).to_pylist()}
    for p in POINTS:
        written = rows[(p.kernel, p.shape, bad)]
        if p.kernel != "vector_add":
            assert written["status"] == "ok" and written["correct"] is True
            continue
        assert (written["status"], written["error_stage"], written["correct"]) == ("incorrect", "check", False)
        message = written["error_message"]
        assert "all zeros against a non-zero reference" in message and "100.0% of elements" in message
        assert "max abs error" in message and "max rel error 1" in message
        assert written["latencies_us"] and len(written["latencies_us"]) == 3  # measured all the same
        assert rows[(p.kernel, p.shape, good)]["status"] == "ok"
    comparison = compare_runs(load(nights.results), good, bad)
    newly = sorted(p.key for p in comparison.points if p.outcome == "newly incorrect")
    assert newly == sorted((p.kernel, p.shape, p.dtype, p.platform) for p in POINTS if p.kernel == "vector_add")
    assert comparison.exit_code == 1
    assert {p.outcome for p in comparison.points if p.key[0] == "mlp"} != {"newly incorrect"}
