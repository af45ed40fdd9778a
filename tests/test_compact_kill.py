"""A real `kernelsweep compact` killed (SIGKILL) in the middle of a dataset: no row lost or duplicated,
for a reader at the moment of the kill and after a second run that finishes the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import date, timedelta
from pathlib import Path

import pytest
from test_results_io import LINEAGE, make_rows

from kernelsweep.results import reader
from kernelsweep.results.writer import write_results

pytestmark = pytest.mark.slow  # kills a process
NIGHTS, RUNS = 25, 3


def _compact(results: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kernelsweep.flows.cli", "compact", str(results), "--before", "2100-01-01"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _layout(results: Path) -> dict[str, list[str]]:
    """partition folder -> its object names (hidden temp files left out, as readers do)."""
    return {
        str(folder.relative_to(results)): sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        for folder in results.glob("v1/platform=*/run_date=*")
    }


def test_a_compaction_killed_midway_loses_and_duplicates_no_row(tmp_path):
    results = tmp_path / "results"
    for night in range(NIGHTS):
        for _ in range(RUNS):
            run = str(uuid.uuid4())
            rows = make_rows(run, "trn2") + make_rows(run, "inf2")
            night_date = date(2026, 3, 1) + timedelta(night)
            write_results(rows, str(results), flow_run_id=run, run_date=night_date, lineage=LINEAGE)
    expected = reader.read(str(results), every_copy=True).sort_by("row_id")
    assert expected.num_rows == NIGHTS * RUNS * 8 and len(set(expected["row_id"].to_pylist())) == expected.num_rows

    process = _compact(results)
    deadline = time.monotonic() + 120
    while not any(n.startswith("compact-") for names in _layout(results).values() for n in names):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "compact wrote nothing in 120 s"
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    layout = _layout(results)
    assert any(len(names) > 1 for names in layout.values()), "the kill came after the last partition"
    seen = reader.read(str(results)).sort_by("row_id")
    assert seen.equals(expected)  # at the kill: every row once, with its values

    finish = _compact(results)
    assert finish.wait(timeout=300) == 0, finish.stderr.read() if finish.stderr else ""
    assert all(len(names) == 1 and names[0].startswith("compact-") for names in _layout(results).values())
    assert reader.read(str(results), every_copy=True).sort_by("row_id").equals(expected)  # one copy of each row
