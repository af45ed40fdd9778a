"""The indexed reading (kernelsweep.report.index) gives what reading every row whole gives
(kernelsweep.report.load + InMemory), on a dataset with what the index's code-level steps must get
right: a re-executed run's second attempt (same row ids, other values), variants (an LNC other than
the platform's default, tunables, a named toolchain), a failed point, nulls, and shapes whose
numeric order is not their text order."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from kernelsweep.report.index import Indexed
from kernelsweep.report.load import load
from kernelsweep.report.series_query import InMemory
from kernelsweep.results.rows import Row
from kernelsweep.results.writer import write_results

FIRST = date(2026, 5, 1)
POINTS = [  # (shape, platform, lnc, tunables, toolchain)
    ("n=128", "trn2", 2, None, None),  # trn2's default LNC: no variant
    ("n=128", "trn2", 1, None, None),  # lnc=1
    ("n=1024", "trn2", 2, "tile=64", None),
    ("n=1024", "trn2", 2, "tile=128", "sdk-b"),
    ("n=256", "trn1", 1, None, None),
]


def _rows(run: str, night: int, scale: float, later: timedelta = timedelta(0)) -> list[Row]:
    started = datetime.combine(FIRST + timedelta(days=night), datetime.min.time(), UTC) + later
    rows = []
    for i, (shape, platform, lnc, tunables, toolchain) in enumerate(POINTS):
        failed = night == 1 and i == 4
        value = scale * (10.0 + i)
        rows.append(
            Row(
                row_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run}/{i}")),
                sweep="s",
                kernel="vector_add",
                kernel_ref="kernelsweep.kernels.vector_add:vector_add",
                shape=shape,
                params={"n": int(shape[2:])},
                dtype="float32",
                platform=platform,
                lnc=lnc,
                seed=0,
                toolchain="sim",
                is_simulation=True,
                status="failed" if failed else "ok",
                error_class="CaptureError" if failed else None,
                metrics={} if failed else {"total_time_us": value},
                latency_median_us=None if failed else value,
                latency_min_us=None if failed else value * 0.99,
                latency_max_us=None if failed else value * 1.01,
                repeats=None if failed else 3,
                tunables=tunables,
                toolchain_name=toolchain,
                compiler_version="2.21" if night < 2 else "2.22",
                flow_run_id=run,
                started_at=started + timedelta(seconds=i),
            )
        )
    return rows


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("index") / "results")
    for night in range(3):
        _write(root, _rows(f"run-{night}", night, 1.0 + night / 10), night)
    _write(root, _rows("run-1", 1, 2.0, timedelta(hours=1)), 1)  # re-executed an hour later: attempt 2 wins
    return root


def _write(root: str, rows: list[Row], night: int) -> None:
    run = rows[0].flow_run_id
    write_results(rows, root, flow_run_id=run, run_date=FIRST + timedelta(days=night), lineage={"flow_run_id": run})


def test_each_row_id_once_from_the_latest_attempt(results: str) -> None:
    indexed = Indexed(results)
    picked = indexed.select("flow_run_id", lambda run: run == "run-1")
    assert len(picked) == len(POINTS) and len({r.row_id for r in picked}) == len(POINTS)
    assert {r.latency_median_us for r in picked if r.ok} == {2.0 * (10.0 + i) for i in range(4)}


def test_the_index_reads_as_the_whole_rows_do(results: str) -> None:
    indexed, whole = Indexed(results), InMemory(load(results))
    assert indexed.latest() == whole.latest()
    assert [(r.shape, r.variant) for r in indexed.latest()] == [
        ("n=128", ""),
        ("n=128", "lnc=1"),
        ("n=256", ""),
        ("n=1024", "tile=64"),
        ("n=1024", "tile=128 toolchain=sdk-b"),
    ]
    got, want = indexed.series(), whole.series()
    assert list(got) == list(want)
    for key in want:
        assert list(got[key].row_ids) == list(want[key].row_ids)
        np.testing.assert_allclose(got[key].levels, want[key].levels)
        assert len(set(got[key].lineage.tolist())) == len(set(want[key].lineage.tolist()))
    assert indexed.runs_newest_first() == whole.runs_newest_first() == ["run-2", "run-1", "run-0"]
    assert indexed.values("compiler_version") == whole.values("compiler_version") == ["2.21", "2.22"]
    newest = indexed.select("compiler_version", lambda v: v == "2.21", newest=1)
    assert newest == whole.select("compiler_version", lambda v: v == "2.21", newest=1)
