"""`kernelsweep compact`: a partition's objects become one; every row id once, before, during and after.

Fast tests on a folder and on moto's S3; the kill in the middle of a real `kernelsweep compact` is
in tests/test_compact_kill.py (slow stage).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import date
from pathlib import Path

import pytest
from test_results_io import LINEAGE, make_rows

from kernelsweep.results import compact, reader
from kernelsweep.results.writer import open_target, write_results

NIGHT = date(2026, 3, 1)


@pytest.fixture(params=["local", "s3"])
def results_uri(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "results")
    return f"s3://{request.getfixturevalue('bucket')}/kernelsweep/results"


def _nights(results: str, runs: int, night: date = NIGHT) -> list[str]:
    """`runs` flow runs of one night, each writing a trn2 and a trn1 object."""
    ids = [str(uuid.uuid4()) for _ in range(runs)]
    for run in ids:
        rows = make_rows(run, "trn2") + make_rows(run, "trn1")
        write_results(rows, results, flow_run_id=run, run_date=night, lineage=LINEAGE)
    return ids


def _objects(results: str) -> list[str]:
    filesystem, root = reader.table_filesystem(results)
    from pyarrow import fs

    infos = filesystem.get_file_info(fs.FileSelector(root, recursive=True))
    return sorted(i.path[len(root) :].lstrip("/") for i in infos if i.type == fs.FileType.File)


def test_each_partition_becomes_one_object_with_every_row_once_and_ids_unchanged(results_uri):
    _nights(results_uri, 3)
    before = reader.read(results_uri).sort_by("row_id")
    done = compact.compact(results_uri)
    assert sorted(c.partition.split("/")[1] for c in done) == ["platform=trn1", "platform=trn2"]
    assert all(c.replaced == 3 and c.rows == 12 for c in done)
    objects = _objects(results_uri)
    assert len(objects) == 2 and all(o.rsplit("/", 1)[1].startswith("compact-") for o in objects)
    after = reader.read(results_uri).sort_by("row_id")
    assert after.equals(before)  # the same rows, ids and values: only where they are stored changed
    assert reader.read(results_uri, every_copy=True).num_rows == before.num_rows

    assert compact.compact(results_uri) == []  # a second run finds nothing to do
    assert _objects(results_uri) == objects


def test_a_compaction_stopped_before_its_deletes_shows_each_row_once_and_finishes_on_the_next_run(tmp_path):
    results = str(tmp_path / "results")
    _nights(results, 2)
    expected = reader.read(results).sort_by("row_id")
    filesystem, _ = reader.table_filesystem(results)
    [first, *_] = compact.partitions(results)
    target = open_target(results)

    class Stopped(Exception):
        pass

    def stop(_filesystem, _paths):
        raise Stopped  # killed after the compacted object was written, before any source was deleted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compact, "_delete", stop)
        with pytest.raises(Stopped):
            compact.compact_partition(filesystem, target, first)
    assert reader.read(results, every_copy=True).num_rows == expected.num_rows + 8  # both copies are there ...
    assert reader.read(results).sort_by("row_id").equals(expected)  # ... and a reader sees each row once

    done = compact.compact(results)
    assert [c.replaced for c in done] == [2, 2]  # the interrupted partition's sources, and the other's
    assert reader.read(results, every_copy=True).sort_by("row_id").equals(expected)


def test_the_latest_attempt_of_a_row_wins_and_a_later_object_wins_over_a_compacted_one(tmp_path):
    results = str(tmp_path / "results")
    [run] = _nights(results, 1)
    slower = [dataclasses.replace(r, metrics={**r.metrics, "total_time_us": 99.0}) for r in make_rows(run, "trn2")]
    write_results(slower, results, flow_run_id=run, run_date=NIGHT, lineage=LINEAGE)  # re-executed: .attempt-2
    [other] = _nights(results, 1)
    assert reader.read(results, every_copy=True).num_rows == 20
    trn2 = reader.read(results, filters=[("platform", "=", "trn2")]).to_pylist()
    assert len(trn2) == 8 and {r["total_time_us"] for r in trn2 if r["flow_run_id"] == run} == {99.0}

    compact.compact(results)
    compacted = reader.read(results, filters=[("platform", "=", "trn2")]).to_pylist()
    assert sorted(r["row_id"] for r in compacted) == sorted(r["row_id"] for r in trn2)
    assert {r["total_time_us"] for r in compacted if r["flow_run_id"] == run} == {99.0}

    newer = [dataclasses.replace(r, metrics={**r.metrics, "total_time_us": 7.0}) for r in make_rows(other, "trn2")]
    write_results(newer, results, flow_run_id=other, run_date=NIGHT, lineage=LINEAGE)  # after the compaction
    latest = reader.read(results, filters=[("platform", "=", "trn2")]).to_pylist()
    assert {r["total_time_us"] for r in latest if r["flow_run_id"] == other and r["status"] == "ok"} == {7.0}


def test_only_partitions_before_a_date_and_with_several_objects_are_compacted(tmp_path):
    results = str(tmp_path / "results")
    _nights(results, 2, date(2026, 3, 1))
    _nights(results, 2, date(2026, 3, 2))
    _nights(results, 1, date(2026, 2, 28))
    done = compact.compact(results, before=date(2026, 3, 2))
    assert {c.partition.rsplit("=", 1)[1] for c in done} == {"2026-03-01"}
    assert len(_objects(results)) == 2 + 4 + 2


def test_params_of_different_kernels_keep_their_columns(tmp_path):
    results = str(tmp_path / "results")
    _nights(results, 2)
    compact.compact(results)
    table = reader.read(results)
    assert {"param_m", "param_k", "param_n"} <= set(table.column_names)
    vector = [r for r in table.to_pylist() if r["kernel"] == "vector_add"]
    assert vector and all(r["param_n"] == 1024 and r["param_m"] is None for r in vector)
    assert Path(results).is_dir()


def test_a_newer_writers_column_and_a_foreign_object_lose_nothing(tmp_path):
    """Issue 41: a column this kernelsweep does not know (a newer writer's) was dropped and its originals
    deleted, exit 0; a foreign Parquet object in the partition was exit 4 for ever. Every value of every
    original object is checked, cell by cell, in the compacted one; the foreign object stays as it was."""
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    from kernelsweep.results.schema import SCHEMA_VERSION

    results = str(tmp_path / "results")
    _nights(results, 2)
    partition = Path(results) / "v1" / "platform=trn2" / f"run_date={NIGHT.isoformat()}"
    older, newer = sorted(partition.glob("*.parquet"))
    table = pq.read_table(newer, partitioning=None)
    extra = pa.array([f"note {i}" for i in range(table.num_rows)])
    # the newer writer also widened a column this one knows: its type is the one kept
    table = table.append_column("energy_uj", pa.array([1.5 * i for i in range(table.num_rows)]))
    table = table.append_column("note", extra).set_column(
        table.schema.get_field_index("lnc"), "lnc", table.column("lnc").cast(pa.int64())
    )
    meta = dict(table.schema.metadata or {}) | {b"kernelsweep.schema_version": str(SCHEMA_VERSION + 1).encode()}
    pq.write_table(table.replace_schema_metadata(meta), newer)
    foreign = partition / "exported-by-hand.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), foreign)
    originals = {p.name: pq.read_table(p, partitioning=None).to_pylist() for p in (older, newer)}
    foreign_bytes = foreign.read_bytes()

    done = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "compact", results, "--before", "2099-01-01"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "exported-by-hand.parquet" in done.stderr  # skipped with one warning, as `report` does
    [compacted] = partition.glob("compact-*.parquet")
    assert foreign.read_bytes() == foreign_bytes and not older.exists() and not newer.exists()
    kept = pq.read_table(compacted, partitioning=None)
    assert kept.schema.field("energy_uj").type == pa.float64() and kept.schema.field("lnc").type == pa.int64()
    by_id = {r["row_id"]: r for r in kept.to_pylist()}
    cells = 0
    for rows in originals.values():
        for row in rows:
            for column, value in row.items():
                assert by_id[row["row_id"]][column] == value, (column, row["row_id"])
                cells += 1
    assert cells > 100 * len(by_id)  # every column of every row was compared (~160 each)
    assert len(by_id) == kept.num_rows == sum(len(rows) for rows in originals.values())
