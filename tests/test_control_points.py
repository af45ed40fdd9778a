"""Control kernels take a shift the whole run took out of every other point: B's run is 4% slower
everywhere (another host of the type), which a history of quiet runs would call a regression on
every point; with `--control` it is none, and a real +15% on one kernel is still exactly its points."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from test_first_compare import KERNELS, SHAPES, _run, _write

from kernelsweep.report.compare import compare_runs

NIGHTS = 8
CONTROL = "softmax"


def _nights(seed: int, slowed: str | None) -> list:
    rng = np.random.default_rng(seed)
    rows = [r for night in range(NIGHTS - 1) for r in _run(rng, f"run-{night}", night, None)]
    return rows + _run(rng, f"run-{NIGHTS - 1}", NIGHTS - 1, slowed, shared=1.04)


def _slower(comparison) -> set:
    return {p.key[:2] for p in comparison.points if p.outcome == "slower"}


def test_a_shift_of_the_whole_run_is_taken_out_by_the_control_kernel():
    rows = _nights(7, None)
    last, before = f"run-{NIGHTS - 1}", f"run-{NIGHTS - 2}"
    assert len(_slower(compare_runs(rows, before, last))) >= 3  # the false calls come together
    controlled = compare_runs(rows, before, last, control=[CONTROL])
    assert _slower(controlled) == set() and controlled.exit_code != 1
    assert any("took a shift of +4" in note or "took a shift of +3" in note for note in controlled.notes)


def test_a_real_change_survives_the_control_through_the_cli(tmp_path):
    rows = _nights(8, "matmul")
    for night in range(NIGHTS):
        _write(tmp_path / "results", [r for r in rows if r.flow_run_id == f"run-{night}"])
    done = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "compare", "--results", str(tmp_path / "results"),
         "--runs", "previous", "latest", "--control", CONTROL, "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    document = json.loads(done.stdout)
    slower = {(p["key"]["kernel"], p["key"]["shape"]) for p in document["points"] if p["outcome"] == "slower"}
    assert done.returncode == 1 and slower == {("matmul", shape) for shape in SHAPES}
    assert set(KERNELS) > {CONTROL}
    refused = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "compare", "--results", str(tmp_path / "results"),
         "--runs", "previous", "latest", "--control", "nope"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert refused.returncode == 2 and "--control nope" in refused.stderr
