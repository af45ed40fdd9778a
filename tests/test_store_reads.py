"""Every store a run reads is checked, never trusted (issue 41): a search's study log and a journal of any
shape a file system can hold. A bad object is skipped with one warning naming it; the run goes on, and
every trial the run journal holds reaches the results exactly once (fast, no Prefect).

Each search case runs a search that is killed part-way (its rows journaled, as the flow does), damages
one object of its study log, and resumes the search as `kernelsweep run` would: the resumed rows and
the ones measured after them are every configuration measured, each once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from specs import VECTOR_ADD, sim_spec

from kernelsweep.results import journal
from kernelsweep.results.journal import Journal, plan_resume, run_key
from kernelsweep.results.rows import Row, row_id
from kernelsweep.search.storage import SEARCH_FOLDER, study_storage
from kernelsweep.search.study import ShapeSearch
from kernelsweep.sweepspec.expansion import expand, expand_spec
from kernelsweep.sweepspec.point import Point

NOW = datetime(2026, 11, 27, 1, 2, 3, tzinfo=UTC)
MATMUL = {"kernel": "matmul", "grid": {"M": [512], "K": [256], "N": [1024]}, "search": {"budget": 8}}


class _Killed(Exception):
    pass


def _row(run_id: str, point: Point) -> Row:
    t = point.tunables
    latency = 100.0 + (128 - int(t["tile_m"])) + (512 - int(t["tile_n"])) / 4 + (t["loop_order"] == "mn") * 7
    return Row(
        row_id=row_id(run_id, point), sweep=point.sweep, kernel=point.kernel, kernel_ref=point.kernel_ref,
        shape=point.shape, params=dict(point.params), dtype=point.dtype, platform=point.platform, lnc=point.lnc,
        seed=point.seed, toolchain="sim", is_simulation=True, status="ok", flow_run_id=run_id,
        latency_median_us=latency, correct=True, tunables=point.tunables_text, search_trial=point.search_trial,
        started_at=NOW, finished_at=NOW,
    )  # fmt: skip


def _search(tmp_path: Path, run: Journal, target, kill_after: int | None) -> list[Row]:
    """One run of the search: resumed from the study and the journal, then measured to its budget."""
    storage, _ = study_storage(str(tmp_path / "results"), "key", run.run_id)
    search = ShapeSearch.open(target, storage, lambda p: None)
    rows = search.resume(run.completed, run.rows())
    done = 0
    while batch := search.propose(3):
        for point in batch:
            if kill_after is not None and done == kill_after:
                raise _Killed  # the rest of the batch stays RUNNING in the stored study
            row = _row(run.run_id, point)
            run.record(point, row)  # journaled first, as the flow does
            search.record(point, row)
            rows.append(row)
            done += 1
    return rows


def _log_objects(tmp_path: Path, run_id: str) -> list[Path]:
    return sorted((tmp_path / "results" / "_journal" / SEARCH_FOLDER / "key" / run_id).glob("log-*.json"))


@pytest.fixture
def killed(tmp_path):
    spec = sim_spec(tmp_path, [MATMUL], name="searched")
    target = next(iter(expand_spec(spec).targets))
    header = journal.RunHeader(run_key="key", run_id=str(uuid.uuid4()), run_date=date(2026, 11, 27),
                               sweep=spec.name, started_at=NOW.isoformat())  # fmt: skip
    run = Journal(journal.open_files(spec.results), header)
    with pytest.raises(_Killed):
        _search(tmp_path, run, target, kill_after=5)
    return spec, target, run


def _foreign_log(tmp_path: Path, target) -> bytes:
    """The log objects of a search of the same shape over another space (another spec's), as one object."""
    other = dataclasses.replace(
        target,
        space={"tile_m": [32, 64], "tile_n": [64, 128], "loop_order": ["nm"]},
        settings=target.settings.model_copy(update={"budget": 3}),
    )
    header = journal.RunHeader(run_key="key", run_id="other", run_date=date(2026, 11, 27), sweep="other",
                               started_at=NOW.isoformat())  # fmt: skip
    _search(tmp_path / "other", Journal(journal.open_files(str(tmp_path / "other" / "results")), header), other, None)
    logs = [entry for p in _log_objects(tmp_path / "other", "other") for entry in json.loads(p.read_bytes())]
    return json.dumps(logs).encode()


@pytest.mark.parametrize(
    "damage",
    ["truncated", "wrong-shape", "wrong-types", "another-study", "a-folder"],
)
def test_a_damaged_study_log_is_skipped_and_every_journaled_trial_reaches_the_results_once(
    tmp_path, killed, caplog, damage
):
    """Was: every later run of the spec exited 4 (JSONDecodeError, TypeError, KeyError)."""
    spec, target, run = killed
    objects = _log_objects(tmp_path, run.run_id)
    journaled = {r.row_id: r for r in run.rows()}
    assert len(journaled) == 5
    bad = objects[len(objects) // 2]
    if damage == "truncated":
        bad.write_bytes(bad.read_bytes()[: len(bad.read_bytes()) // 2])
    elif damage == "wrong-shape":
        bad.write_text('{"op_code": 4, "worker_id": "w"}')
    elif damage == "wrong-types":  # an operation Optuna knows, with a field of the wrong type
        bad.write_text('[{"op_code": 4, "worker_id": "w", "study_id": 0, "datetime_start": 5}]')
    elif damage == "another-study":
        bad = objects[-1].with_name("log-000000999.json")
        bad.write_bytes(_foreign_log(tmp_path, target))
    else:
        bad.unlink()
        bad.mkdir()
        (bad / "x").write_text("[]")
    with caplog.at_level(logging.WARNING, logger="kernelsweep"):
        rows = _search(tmp_path, run, target, kill_after=None)
    ids = [r.row_id for r in rows]
    assert len(ids) == len(set(ids)), "a configuration measured twice"
    assert set(journaled) <= set(ids), "a journaled trial never reached the results"
    assert {r.row_id for r in run.rows()} == set(ids)  # every row written is in the results, once
    said = [r.getMessage() for r in caplog.records]
    if damage != "a-folder":
        assert len(said) == 1 and "\n" not in said[0], said
        assert (str(bad) in said[0] and "delete it" in said[0]) or "do not fit its space" in said[0]


KERNEL = {**VECTOR_ADD, "grid": {"n": [2048], "free_size": [1, 2]}}


def test_a_journal_whose_header_is_a_folder_is_removed_with_one_warning_and_the_run_starts_afresh(tmp_path, caplog):
    """Was: exit 4 (IsADirectoryError) at every later run of the spec."""
    spec = sim_spec(tmp_path, [KERNEL], name="folder")
    points, key = expand(spec), run_key(spec)
    run = journal.begin(spec.results, plan_resume(spec.results, key, points), str(uuid.uuid4()), date(2026, 11, 27),
                        spec.name, NOW)  # fmt: skip
    run.release()
    header = Path(run.files.uri(f"{run.base}/run.json"))
    header.unlink()
    (header / "inside").mkdir(parents=True)
    (header / "inside" / "x.json").write_text("{}")
    with caplog.at_level(logging.WARNING, logger="kernelsweep"):
        plan = plan_resume(spec.results, key, points, find=True)
    journal.lease.release(journal.lease.open_lease(spec.results, key)[0])
    assert plan.resumed is None and plan.reused == {}
    assert not header.exists()
    [said] = [r.getMessage() for r in caplog.records]
    assert run.run_id in said and "removed" in said


GOOD_REF = {"uri": "file:///x", "sha256": "ab" * 32, "size_bytes": 3}


@pytest.mark.parametrize(
    "entry",
    [
        {"refs": {"neff": {**GOOD_REF, "sha256": 5}}, "meta": {}},  # was: exit 4 (TypeError in the hash check)
        {"refs": {"neff": {**GOOD_REF, "sha256": "../../etc/passwd"}}, "meta": {}},  # was: a failed row, every run
        {"refs": {"neff": {**GOOD_REF, "size_bytes": "big"}}, "meta": {}},
        {"refs": [], "meta": {}},
        {"refs": {}, "meta": {"compiler": 2}},
        None,  # a folder where the entry belongs (was: exit 4, IsADirectoryError)
    ],
    ids=["hash-number", "hash-path", "size-text", "refs-list", "meta-number", "a-folder"],
)
def test_a_cache_entry_of_the_wrong_shape_is_a_miss_moved_aside_with_one_warning(tmp_path, caplog, entry):
    from kernelsweep.stores import cache
    from kernelsweep.stores.artifacts import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    cache.record(store, "compile", "2.21", "k" * 64, {})
    [path] = (tmp_path / "artifacts" / "index").rglob("*.json")
    if entry is None:
        path.unlink()
        (path / "x").mkdir(parents=True)
    else:
        path.write_text(json.dumps(entry))
    with caplog.at_level(logging.WARNING, logger="kernelsweep"):
        assert cache.lookup(store, "compile", "2.21", "k" * 64) is None
    [said] = [r.getMessage() for r in caplog.records]
    assert "cannot be read" in said and "moved aside, rebuilding it" in said and "\n" not in said
    assert not path.exists() and cache.lookup(store, "compile", "2.21", "k" * 64) is None
