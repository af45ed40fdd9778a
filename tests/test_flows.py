"""End-to-end: the sweep and kernel_run flows through Prefect, results read back with pyarrow."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from prefect_server import recorded_task_run
from specs import sim_spec

from kernelsweep.results.schema import SCHEMA_VERSION
from kernelsweep.stores.artifacts import ArtifactRef, LocalArtifactStore
from kernelsweep.sweepspec.expansion import expand

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _spec(tmp_path: Path, kernels: list[dict], platforms=("trn2", "trn1")):
    return sim_spec(tmp_path, kernels, name="e2e", platforms=platforms, capture={"num_exec": 3, "profile_nth_exec": 2})


VECTOR_ADD = {
    "kernel": "kernelsweep.kernels.vector_add:vector_add",
    "dtypes": ["float32"],
    "grid": {"n": [2048], "free_size": [1, 16]},
}
MLP = {"kernel": "kernelsweep.kernels.mlp:mlp", "dtypes": ["bfloat16"], "grid": {"s": [128], "h": [256], "i": [128]}}


def test_sweep_writes_one_verified_row_per_point(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = _spec(tmp_path, [VECTOR_ADD, MLP])
    report = sweep(spec)
    points = expand(spec)
    assert len(report.paths) == 2  # one object per platform partition
    for path in report.paths:
        assert "/v1/platform=" in path and f"/{report.flow_run_id}.parquet" in path
    table = pq.read_table(report.paths[0]).to_pylist() + pq.read_table(report.paths[1]).to_pylist()
    assert sorted(r["row_id"] for r in table) == sorted({r["row_id"] for r in table})
    assert {(r["kernel"], r["shape"], r["platform"]) for r in table} == {
        (p.kernel, p.shape, p.platform) for p in points
    }
    store = LocalArtifactStore(tmp_path / "artifacts")
    for row in table:
        assert row["status"] == "ok", row["error_message"]
        assert row["is_simulation"] is True and row["toolchain"] == "sim"
        assert row["correct"] is True and row["total_time_us"] > 0 and row["roofline_percent"] > 0
        assert row["compiler_version"].endswith("+kernelsweep.sim")
        assert row["flow_run_id"] == report.flow_run_id
        assert set(dict(row["task_run_ids"])) == {"trace", "compile", "inputs", "capture", "extract"}
        assert len(row["inputs"]) == (2 if row["kernel"] == "vector_add" else 4) and len(row["outputs"]) == 1
        for name in ("kernel_source", "ir", "neff", "ntff", "profile"):
            ref = ArtifactRef(row[f"{name}_uri"], row[f"{name}_sha256"], 0)
            assert store.fetch(ref, tmp_path / "check" / row["row_id"] / name).is_file()
        assert row["param_n"] == (2048 if row["kernel"] == "vector_add" else None)
    metadata = pq.read_schema(report.paths[0]).metadata
    assert metadata[b"kernelsweep.schema_version"] == str(SCHEMA_VERSION).encode()


def test_failed_point_is_a_row_and_the_rest_completes(tmp_path):
    from kernelsweep.flows.sweep import sweep

    crashing = {"kernel": "kernels.faulty:crashes_on_device", "dtypes": ["float32"], "grid": {"n": [1024]}}
    report = sweep(_spec(tmp_path, [crashing, VECTOR_ADD], platforms=("trn2",)))
    rows = {r.kernel: r for r in report.rows}
    failed = rows["crashes_on_device"]
    assert failed.status == "failed" and failed.error_stage == "capture"
    assert failed.error_class == "CaptureError" and "simulated device fault" in failed.error_message
    assert sum(r.ok for r in report.rows) == 2
    on_disk = pq.read_table(report.paths[0]).to_pylist()
    assert len(on_disk) == 3 and {r["status"] for r in on_disk} == {"ok", "failed"}
    stored = next(r for r in on_disk if r["status"] == "failed")
    assert stored["total_time_us"] is None and stored["correct"] is None  # no fake numbers
    assert stored["neff_sha256"] and stored["ir_sha256"]  # lineage up to the failure is kept
    assert stored["ntff_sha256"] is None


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_large_sweeps_split_into_bounded_shard_runs(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = _spec(tmp_path, [VECTOR_ADD], platforms=("trn2", "trn1", "inf2"))
    spec = spec.model_copy(update={"execution": spec.execution.model_copy(update={"max_points_per_flow_run": 4})})
    report = sweep(spec)
    run_ids = {p.rsplit("/", 1)[1] for p in report.paths}
    assert len(run_ids) == 2 and report.flow_run_id + ".parquet" not in run_ids  # two shard runs wrote
    rows = [r for p in report.paths for r in pq.read_table(p).to_pylist()]
    assert len(rows) == 6 and len({r["row_id"] for r in rows}) == 6
    assert {r["flow_run_id"] for r in rows} == {i.removesuffix(".parquet") for i in run_ids}


def test_repeats_give_latency_percentiles_and_the_median_profile(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = _spec(tmp_path, [VECTOR_ADD], platforms=("trn2",))
    spec = spec.model_copy(update={"capture": spec.capture.model_copy(update={"repeats": 5})})
    rows = pq.read_table(sweep(spec).paths[0]).to_pylist()
    for row in rows:
        assert row["repeats"] == 5
        assert row["latency_min_us"] < row["latency_max_us"]  # the model's run noise (whole ns: neighbours may tie)
        assert row["latency_min_us"] <= row["latency_median_us"] <= row["latency_max_us"]
        assert row["latency_median_us"] <= row["latency_p90_us"] <= row["latency_p99_us"] <= row["latency_max_us"]
        assert row["total_time_us"] == row["latency_median_us"]  # metrics come from the median repeat


def test_kernel_run_runs_exactly_one_point(tmp_path):
    from kernelsweep.flows.kernel_run import kernel_run

    spec = _spec(tmp_path, [VECTOR_ADD], platforms=("trn2",))
    target = expand(spec)[1]
    report = kernel_run(spec, target.point_id)
    assert [(r.shape, r.status) for r in report.rows] == [(target.shape, "ok")]
    assert len(pq.read_table(report.paths[0])) == 1


def test_each_stage_task_run_names_the_stage_results_it_was_given_and_nothing_else(tmp_path):
    """The task-run graph's edges: each stage task is linked to the stage tasks whose results it took;
    the context and the point it is also given are no task's result and are not walked for one."""
    from kernelsweep.flows.kernel_run import kernel_run

    spec = _spec(tmp_path, [VECTOR_ADD], platforms=("trn2",))
    report = kernel_run(spec, expand(spec)[0].point_id)
    ids = dict(pq.read_table(report.paths[0]).to_pylist()[0]["task_run_ids"])
    wanted = {
        "trace": {},
        "compile": {"traced": {ids["trace"]}},
        "inputs": {},
        "capture": {"compiled": {ids["compile"]}, "inputs": {ids["inputs"]}},
        "extract": {"compiled": {ids["compile"]}, "inputs": {ids["inputs"]}, "captured": {ids["capture"]}},
    }
    for stage, upstream in wanted.items():
        inputs = recorded_task_run(ids[stage])["task_inputs"]
        found = {name: {ref["id"] for ref in refs} for name, refs in inputs.items() if refs}
        assert found == upstream, stage
        assert set(inputs) >= {"ctx", "point"}, stage


def test_a_host_told_its_platform_runs_only_its_own_points(tmp_path, monkeypatch):
    """A trn1 NEFF is never captured on a trn2 host: those points are left for trn1 hosts, and said so."""
    from kernelsweep.flows.sweep import sweep

    monkeypatch.setenv("KERNELSWEEP_SIM_PLATFORM", "trn2")
    report = sweep(_spec(tmp_path, [VECTOR_ADD], platforms=("trn2", "trn1", "inf2")))
    assert {r.platform for r in report.rows} == {"trn2"} and len(report.rows) == 2
    assert report.left_for_other_hosts == {"trn1": 2, "inf2": 2}
    assert len(report.paths) == 1 and "platform=trn2" in report.paths[0]
