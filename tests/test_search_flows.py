"""LNC as an axis through the sweep flow (issue 24): both settings run as their own rows, an impossible
combination in the grid is dropped while the valid points run, and a compiler bug that exists only at
LNC=2 (aws-neuron-sdk#1298) fails exactly those rows, which the report's kernel x toolchain x LNC matrix
then shows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from specs import VECTOR_ADD, sim_spec

from kernelsweep.report.summary import build_report
from kernelsweep.results import reader

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_lnc_one_and_two_double_the_rows_and_an_lnc2_only_compiler_bug_fails_exactly_those(tmp_path, monkeypatch):
    from kernelsweep.flows.sweep import sweep

    monkeypatch.setenv("KERNELSWEEP_SIM_FAULTS", "compile-error-lnc2=vector_add")
    # one valid shape (n=2048): the fast stage's budget; partition_size 256 is impossible (128 partitions)
    block = {**VECTOR_ADD, "grid": {"n": [2048], "partition_size": [128, 256]}, "lnc": [1, 2]}
    sweep(sim_spec(tmp_path, [block], name="lnc"))
    rows = [SimpleNamespace(**r) for r in reader.read(str(tmp_path / "results")).to_pylist()]
    assert len(rows) == 2 and len({r.row_id for r in rows}) == 2  # one shape at each LNC, each its own row
    assert sorted((r.param_n, r.param_partition_size, r.lnc) for r in rows) == [(2048, 128, 1), (2048, 128, 2)]
    for r in rows:
        if r.lnc == 2:
            assert (r.status, r.error_stage, r.error_class) == ("failed", "compile", "InternalCompilerError")
            assert "NCC_IXLV002" in (r.error_message or "") and r.latency_median_us is None
        else:
            assert r.status == "ok" and r.correct is True, r.error_message
    matrix = {m["lnc"]: m for m in build_report(str(tmp_path / "results")).matrix}
    assert (matrix[1]["traced"], matrix[1]["compiled"], matrix[1]["correct"]) == ("1/1", "1/1", "1/1")
    assert (matrix[2]["traced"], matrix[2]["compiled"], matrix[2]["correct"]) == ("1/1", "0/1", "0/1")
