"""A journal is read, never trusted: no file in it can crash a run or wedge its spec (fast, no Prefect).

Each case writes what a disk error, a sync tool, another version or a person could leave in a
journal, and checks what the next `kernelsweep run` of the spec plans: a bad entry is a point to
measure again (one warning naming its file), a bad header an abandoned run (removed, one warning),
a header of another format a one-line refusal naming `--remeasure`, and what a finished or
superseded run left behind is removed. docs/reliability.md lists these cases.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from specs import VECTOR_ADD, sim_spec

from kernelsweep.errors import UsageError
from kernelsweep.results import journal
from kernelsweep.results.captures import StoredCapture
from kernelsweep.results.journal import encode_row, entry_name, plan_resume, run_key
from kernelsweep.results.row_identity import identity_of
from kernelsweep.results.row_parts import columns
from kernelsweep.results.rows import Row, row_id
from kernelsweep.stage_results import CaptureResult
from kernelsweep.stores.artifacts import ArtifactRef
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.toolchain.iterations import IterationTiming

KERNEL = {**VECTOR_ADD, "grid": {"n": [2048], "free_size": [1, 2, 4]}}
NOW = datetime(2026, 11, 26, 1, 2, 3, tzinfo=UTC)


@pytest.fixture
def sweep(tmp_path):
    spec = sim_spec(tmp_path, [KERNEL], name="checked")
    return spec, expand(spec), run_key(spec)


def _row(run_id: str, point, **changes) -> Row:
    identity = columns(identity_of(point, row_id(run_id, point), toolchain="sim", is_simulation=True))
    fields = identity | dict(
        status="ok", metrics={"total_time_us": 12.5}, flow_run_id=run_id, started_at=NOW, finished_at=NOW
    )
    return Row(**{**fields, **changes})


def _interrupted(spec, points, key) -> journal.Journal:
    """A run that journaled every point and stopped before writing its objects."""
    run = journal.begin(spec.results, plan_resume(spec.results, key, points), str(uuid.uuid4()), date(2026, 11, 26),
                        spec.name, NOW)  # fmt: skip
    for point in points:
        run.record(point, _row(run.run_id, point))
    run.release()
    return run


def _entry(run: journal.Journal, point) -> Path:
    return Path(run.files.uri(f"{run.base}/points/{entry_name(point)}"))


def _header(run: journal.Journal) -> Path:
    return Path(run.files.uri(f"{run.base}/run.json"))


def _plan(spec, points, key, caplog, **options):
    with caplog.at_level(logging.WARNING, logger="kernelsweep"):
        plan = plan_resume(spec.results, key, points, find=True, **options)
    journal.lease.release(journal.lease.open_lease(spec.results, key)[0])  # the spec's lease, as at a CLI's exit
    if plan.lease:
        journal.lease.release(plan.lease)
    return plan


def _entry_doc(row: Row, **changes) -> bytes:
    doc = json.loads(encode_row(row))
    doc["row"].update(changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "change",
    [
        {"metrics": {"total_time_us": "fast"}},  # a metric that is not a number (was: exit 4 for ever)
        {"lnc": "1"},  # a number as a string
        {"is_simulation": 1},
        {"latencies_us": [True, 2.0]},
        {"started_at": 1764120000},
        {"row_id": str(uuid.uuid4())},  # a row id its run and point do not give
        {"flow_run_id": "someone-else"},
        {"shape": "n=1,free_size=1"},  # another point's row
        {"metrics": {"total_time_us": -12.5}},  # a negative time (was: reused as an ok row)
        {"latencies_us": [3.0, -1.0]},
        {"capture_seconds": float("inf")},
        {"finished_at": "2026-11-26T01:02:02+00:00"},  # before it started
    ],
    ids=[
        "metric-text",
        "int-as-text",
        "bool-as-int",
        "bool-in-floats",
        "time-as-number",
        "row-id",
        "run",
        "point",
        "negative-metric",
        "negative-latency",
        "infinite-seconds",
        "ends-before-start",
    ],  # fmt: skip
)
def test_a_bad_entry_is_measured_again_with_one_warning_naming_its_file(sweep, caplog, change):
    spec, points, key = sweep
    run = _interrupted(spec, points, key)
    bad = _entry(run, points[1])
    bad.write_bytes(_entry_doc(_row(run.run_id, points[1]), **change))
    plan = _plan(spec, points, key, caplog)
    assert plan.resumed is not None and plan.resumed.run_id == run.run_id
    assert sorted(plan.reused) == sorted(p.point_id for p in points if p != points[1])
    assert [p.point_id for p in plan.todo(points)] == [points[1].point_id]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(bad) in said[0] and "runs again" in said[0] and "\n" not in said[0]


def test_entries_that_are_not_json_or_not_entries_are_measured_again(sweep, caplog):
    spec, points, key = sweep
    run = _interrupted(spec, points, key)
    for point, junk in zip(points, [b"\xff\xfe", b"[1, 2]", b'{"format": 1, "row": null}'], strict=True):
        _entry(run, point).write_bytes(junk)
    plan = _plan(spec, points, key, caplog)
    assert plan.reused == {} and len(plan.todo(points)) == len(points)
    assert len(caplog.records) == len(points)


@pytest.mark.parametrize(
    "header",
    [b"null", b"[]", b"\x00garbage", b'{"format": 1, "run_key": 1}'],
    ids=["null", "list", "binary", "wrong-types"],
)
def test_a_header_nothing_can_resume_is_removed_with_one_warning_and_the_run_starts_afresh(sweep, caplog, header):
    spec, points, key = sweep
    run = _interrupted(spec, points, key)
    _header(run).write_bytes(header)
    plan = _plan(spec, points, key, caplog)
    assert plan.resumed is None and plan.reused == {}
    assert not Path(run.files.uri(run.base)).exists()
    [said] = [r.getMessage() for r in caplog.records]
    assert run.run_id in said and "removed" in said


def test_a_header_with_a_key_holding_a_line_break_is_removed_with_a_one_line_warning(sweep, caplog):
    """Found by tests/test_journal_fuzz.py: the unknown key was echoed into the warning as it was."""
    spec, points, key = sweep
    run = _interrupted(spec, points, key)
    doc = json.loads(_header(run).read_bytes())
    _header(run).write_bytes(json.dumps({**doc, "\n": 1}).encode())
    plan = _plan(spec, points, key, caplog)
    assert plan.resumed is None
    [said] = [r.getMessage() for r in caplog.records]
    assert "removed" in said and "'\\n'" in said and "\n" not in said


def test_a_header_whose_time_is_not_text_is_not_resumed(sweep, caplog):
    """Was: `started_at` a number made every later run exit 4 (comparing it with text)."""
    spec, points, key = sweep
    run, other = _interrupted(spec, points, key), _interrupted(spec, points, key)
    doc = json.loads(_header(run).read_bytes())
    _header(run).write_text(json.dumps({**doc, "started_at": 20261126}))
    plan = _plan(spec, points, key, caplog)
    assert plan.resumed is not None and plan.resumed.run_id == other.run_id


def test_a_header_of_another_format_is_refused_naming_the_way_out_and_remeasure_starts_over(sweep, caplog):
    spec, points, key = sweep
    run = _interrupted(spec, points, key)
    doc = json.loads(_header(run).read_bytes())
    _header(run).write_text(json.dumps({**doc, "format": 2}))
    with pytest.raises(UsageError) as refused:
        _plan(spec, points, key, caplog)
    message = refused.value.message
    assert "format 2" in message and "--remeasure" in message and str(_header(run)) in message
    assert "\n" not in message and _header(run).exists()
    plan = _plan(spec, points, key, caplog, remeasure=True)
    assert plan.resumed is None and not Path(run.files.uri(run.base)).exists()


def test_what_a_finished_or_superseded_run_left_is_removed_by_the_next_run(sweep, caplog):
    spec, points, key = sweep
    finished, older, newest = (_interrupted(spec, points, key) for _ in range(3))
    _header(finished).unlink()  # a close cut short after the header went
    doc = json.loads(_header(older).read_bytes())
    _header(older).write_text(json.dumps({**doc, "started_at": "2026-11-25T00:00:00+00:00"}))
    plan = _plan(spec, points, key, caplog)
    assert plan.resumed is not None and plan.resumed.run_id == newest.run_id
    for gone in (finished, older):
        assert not Path(gone.files.uri(gone.base)).exists()
    assert len(caplog.records) == 2 and all("removed the journal" in r.getMessage() for r in caplog.records)


def test_a_resume_by_id_of_a_header_nothing_can_read_is_one_line(sweep):
    spec, points, key = sweep
    run = _interrupted(spec, points, key)
    _header(run).write_bytes(b'{"format": 1}')
    with pytest.raises(UsageError) as refused:
        plan_resume(spec.results, key, points, run_id=run.run_id)
    assert "--remeasure" in refused.value.message and "\n" not in refused.value.message


def test_a_journaled_capture_reads_back_as_it_was_and_a_bad_one_is_skipped_with_one_warning(sweep, caplog):
    spec, points, key = sweep
    run = journal.begin(spec.results, plan_resume(spec.results, key, points), str(uuid.uuid4()), date(2026, 11, 26),
                        spec.name, NOW)  # fmt: skip
    ref = ArtifactRef("file:///store/ab", "ab" * 32, 10)
    timing = IterationTiming((1.5, 2.25), "nrt-bench")
    captured = CaptureResult([ref, ref], {"out": ref}, "0-1", 2.5, (True, False), ("dge off",), timing)
    for point in points:
        run.record_capture(StoredCapture(point.point_id, captured, "task-1"), point)
    found = run.captures(points)
    assert found == {p.point_id: StoredCapture(p.point_id, captured, "task-1") for p in points}  # exactly
    truncated, foreign = points[0], points[1]
    path = Path(run.files.uri(f"{run.base}/captures/{entry_name(truncated)}"))
    path.write_bytes(path.read_bytes()[:40])
    other = Path(run.files.uri(f"{run.base}/captures/{entry_name(foreign)}"))
    other.write_bytes(Path(run.files.uri(f"{run.base}/captures/{entry_name(points[2])}")).read_bytes())
    with caplog.at_level(logging.WARNING, logger="kernelsweep"):
        found = run.captures(points)
    assert list(found) == [points[2].point_id]  # the two bad ones are captured again
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and str(path) in warned[0] + warned[1] and "another point's capture" in " ".join(warned)
    run.close()
    assert not Path(run.files.uri(f"{run.base}/captures")).exists()  # a finished run leaves no capture behind
