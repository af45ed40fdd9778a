"""Nothing measured is lost (fast variants, in-process through Prefect's test harness).

A sweep stopped part-way (a stop request, its results location dying) keeps every finished point's
row in its journal and writes no object; resuming it reuses exactly those rows (same row_id, same
capture, nothing measured again) and measures the rest, under the original run's id and date.
docs/reliability.md lists these tests against the faults they prove.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from s3_server import FaultProxy, apply_env, aws_test_env, create_bucket
from specs import sim_spec

from kernelsweep.errors import StoreError
from kernelsweep.results import journal, reader
from kernelsweep.results.journal import decode_row, encode_row, find_unfinished, run_key
from kernelsweep.results.rows import Row, row_id
from kernelsweep.results.writer import parquet_bytes, rows_to_table
from kernelsweep.sweepspec.expansion import expand

pytestmark = pytest.mark.usefixtures("prefect_harness")

VECTOR_ADD = {
    "kernel": "kernelsweep.kernels.vector_add:vector_add",
    "dtypes": ["float32"],
    "grid": {"n": [2048], "free_size": [1, 2, 4, 8]},
}


@pytest.fixture(autouse=True)
def _no_stop_left_over():
    from kernelsweep.flows import stopping

    stopping.reset()
    yield
    stopping.reset()


def _spec(tmp_path: Path, **settings):
    # 8 points, one compile at a time: a stop after the first row always leaves points never started.
    return sim_spec(
        tmp_path, [VECTOR_ADD], name="resume", platforms=("trn2", "trn1"), execution={"compile_slots": 1}, **settings
    )


def _stop_after(rows: int):
    """A progress listener that asks the run to stop once `rows` points are done."""
    from kernelsweep.flows import stopping

    seen = []

    def listener(summary) -> None:
        seen.append(summary)
        if len(seen) == rows:
            stopping.request_stop()

    return listener


def _interrupted(spec, rows: int = 1):
    """Run `spec` and stop it after `rows` points; returns (journal header, the journaled rows by point id)."""
    from kernelsweep.flows import stopping
    from kernelsweep.flows.host_run import SweepInterrupted
    from kernelsweep.flows.progress import subscribe
    from kernelsweep.flows.sweep import sweep

    with subscribe(_stop_after(rows)), pytest.raises(SweepInterrupted) as stopped:
        sweep(spec)
    stopping.reset()
    header = find_unfinished(spec.results, run_key(spec))
    assert header is not None
    saved = journal.open_run(spec.results, header.run_key, header.run_id).completed(expand(spec))
    assert stopped.value.done == len(saved) and rows <= len(saved) < len(expand(spec))
    assert "saved in" in stopped.value.message and "\n" not in stopped.value.message
    return header, saved


def _objects(results: Path) -> list[Path]:
    return sorted((results / "v1").rglob("*.parquet")) if (results / "v1").exists() else []


def test_a_row_survives_the_journal_exactly(tmp_path):
    """Bytes assembled from journaled rows equal those from the rows in memory (so a retried or resumed
    write is recognised as identical)."""
    now = datetime(2026, 11, 26, 1, 2, 3, 456789, tzinfo=UTC)
    row = Row(
        row_id=str(uuid.uuid4()),
        sweep="s",
        kernel="mlp",
        kernel_ref="kernelsweep.kernels.mlp:mlp",
        shape="b=1,s=128",
        params={"b": 1, "s": 128},
        dtype="bfloat16",
        platform="trn2",
        lnc=2,
        seed=0,
        toolchain="sim",
        is_simulation=True,
        status="ok",
        metrics={"total_time_us": 45.25659600000001, "hardware_flops": 427_819_008, "dma_active_time_us": None},
        extra_metrics={"odd": float("inf"), "tiny": 5e-324},
        inputs=[{"name": "x", "uri": "file:///a", "sha256": "0" * 64, "size_bytes": 10}],
        flow_run_id="run-1",
        task_run_ids={"trace": "t1", "capture": "t4"},
        started_at=now,
        finished_at=now,
        achieved_tflops=1 / 3,
        correct=True,
    )
    failed = Row(**{**row.__dict__, "row_id": str(uuid.uuid4()), "status": "failed", "metrics": {}, "correct": None})
    back = [decode_row(encode_row(r)) for r in (row, failed)]
    assert back == [row, failed]
    assert parquet_bytes(rows_to_table(back, {})) == parquet_bytes(rows_to_table([row, failed], {}))


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_a_stopped_sweep_keeps_what_it_finished_and_a_resume_measures_only_the_rest(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = _spec(tmp_path)
    header, saved = _interrupted(spec)
    assert _objects(tmp_path / "results") == []  # nothing half-written where readers look

    report = sweep(spec, resume_run_id=header.run_id)

    assert report.flow_run_id == header.run_id
    assert [p.name for p in _objects(tmp_path / "results")] == [f"{header.run_id}.parquet"] * 2
    rows = reader.read(str(tmp_path / "results")).to_pylist()
    points = expand(spec)
    assert Counter((r["kernel"], r["shape"], r["platform"]) for r in rows) == Counter(
        (p.kernel, p.shape, p.platform) for p in points
    )  # every point exactly once
    assert sorted(r["row_id"] for r in rows) == sorted(row_id(header.run_id, p) for p in points)
    by_id = {r["row_id"]: r for r in rows}
    for before in saved.values():  # the same rows: same capture, same task runs, not measured again
        after = by_id[before.row_id]
        assert after["ntff_sha256"] == before.ntff_sha256 and dict(after["task_run_ids"]) == before.task_run_ids
        assert after["started_at"] == before.started_at
    new = [r for r in rows if r["row_id"] not in {b.row_id for b in saved.values()}]
    old_tasks = {t for b in saved.values() for t in b.task_run_ids.values()}
    assert new and all(not set(dict(r["task_run_ids"]).values()) & old_tasks for r in new)
    assert len({r["ntff_sha256"] for r in rows}) == len(rows)  # one capture per point, none twice
    assert all(r["status"] == "ok" and r["flow_run_id"] == header.run_id for r in rows)
    assert find_unfinished(spec.results, run_key(spec)) is None
    assert not list((tmp_path / "results" / "_journal").rglob("*.json"))  # the journal is gone


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_remeasure_measures_every_point_again_under_the_same_ids(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = _spec(tmp_path)
    header, saved = _interrupted(spec)
    sweep(spec, resume_run_id=header.run_id, remeasure=True)
    rows = {r["row_id"]: r for r in reader.read(str(tmp_path / "results")).to_pylist()}
    assert len(rows) == 8
    for before in saved.values():
        assert rows[before.row_id]["ntff_sha256"] != before.ntff_sha256  # captured again


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_a_sharded_sweep_resumes_each_shard_under_its_first_id(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = _spec(tmp_path)
    spec = spec.model_copy(update={"execution": spec.execution.model_copy(update={"max_points_per_flow_run": 3})})
    header, saved = _interrupted(spec)
    started = journal.open_run(spec.results, header.run_key, header.run_id).header.shards
    assert "0" in started and {b.flow_run_id for b in saved.values()} <= set(started.values())

    report = sweep(spec, resume_run_id=header.run_id)
    rows = reader.read(str(tmp_path / "results")).to_pylist()
    assert len(rows) == 8 and len({r["row_id"] for r in rows}) == 8
    shard_ids = {r["flow_run_id"] for r in rows}
    assert len(shard_ids) == 3 and set(started.values()) <= shard_ids  # shards that had started kept their ids
    for before in saved.values():
        assert before.row_id in {r["row_id"] for r in rows}
    assert {Path(p).name.removesuffix(".parquet") for p in report.paths} == shard_ids


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_a_results_location_that_dies_mid_run_stops_the_sweep_and_a_resume_finishes_it(
    tmp_path, moto_endpoint, monkeypatch
):
    """S3 goes away after the first point: the sweep stops scheduling (its rows could not be saved),
    says what is saved, and once S3 is back the same sweep reuses those rows and finishes."""
    from kernelsweep.flows.progress import subscribe
    from kernelsweep.flows.sweep import sweep
    from kernelsweep.stores import s3

    monkeypatch.setattr(s3, "RETRY_MAX_ATTEMPTS", 2)  # boto's own retries would take minutes to give up
    with FaultProxy(moto_endpoint) as proxy:
        apply_env(monkeypatch, aws_test_env(proxy.url))
        bucket = create_bucket(moto_endpoint)
        spec = _spec(tmp_path, results=f"s3://{bucket}/results")

        def endpoint_dies(summary) -> None:
            proxy.down = True

        with subscribe(endpoint_dies), pytest.raises(StoreError) as failed:
            sweep(spec)
        message = failed.value.message
        assert "\n" not in message and "finished points are saved in" in message and "run" in message
        assert any(status == 0 for _, _, status in proxy.log)  # the endpoint really was unreachable

        proxy.down = False
        header = find_unfinished(spec.results, run_key(spec))
        saved = journal.open_run(spec.results, header.run_key, header.run_id).completed(expand(spec))
        assert 1 <= len(saved) < 8
        sweep(spec, resume_run_id=header.run_id)
        rows = reader.read(spec.results).to_pylist()
    assert len(rows) == 8 and len({r["row_id"] for r in rows}) == 8
    by_id = {r["row_id"]: r for r in rows}
    assert all(by_id[b.row_id]["ntff_sha256"] == b.ntff_sha256 for b in saved.values())
