"""One capture per NeuronCore: parallel captures on 2 simulated cores never reach the busy error."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from prefect_server import recorded_task_run
from specs import sim_spec

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_parallel_captures_share_two_cores_without_a_busy_error(tmp_path, monkeypatch):
    from kernelsweep.flows.sweep import sweep

    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))
    monkeypatch.setenv("KERNELSWEEP_SIM_CORES", "2")
    monkeypatch.setenv("KERNELSWEEP_SIM_TIME_SCALE", "0.05")  # captures last ~60 ms, so they overlap
    kernel = {
        "kernel": "kernelsweep.kernels.vector_add:vector_add",
        "dtypes": ["float32"],
        "grid": {"n": [4096], "free_size": [1, 2, 4, 8, 16, 32]},
    }
    spec = sim_spec(tmp_path, [kernel], name="exclusive", execution={"compile_slots": 4})
    report = sweep(spec)
    rows = pq.read_table(report.paths[0]).to_pylist()
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    assert {r["visible_cores"] for r in rows} == {"0", "1"}  # both cores were used
    run_counts = [recorded_task_run(dict(r["task_run_ids"])["capture"])["run_count"] for r in rows]
    assert run_counts == [1] * 6  # no capture was ever refused by the (simulated) runtime
    spans = sorted((r["started_at"], r["finished_at"]) for r in rows)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))  # points overlapped
