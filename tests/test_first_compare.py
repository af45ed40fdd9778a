"""A sweep's first compare through the real CLI: no point has other runs, so the run-to-run noise is
lent by the sweep's points (kernelsweep.report.prior). Two runs of 36 points, 7 repeats, each point
of each run shifted by its own 1% (the simulator's default run-level noise): an unchanged re-run is
never a regression, and one kernel made 15% slower is called slower on exactly its points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from report_rows import row

from kernelsweep.report.load import COLUMNS
from kernelsweep.results.writer import object_key

KERNELS = ("vector_add", "matmul", "softmax")
SHAPES = [f"n={2**i}" for i in range(6, 18)]
REPEATS, JITTER, RUN_NOISE = 7, 0.01, 0.01


def _run(rng: np.random.Generator, name: str, night: int, slowed: str | None, shared: float = 1.0) -> list:
    rows = []
    for kernel in KERNELS:
        for i, shape in enumerate(SHAPES):
            factor = 1.15 if kernel == slowed else 1.0
            shift = 1 + RUN_NOISE * rng.standard_normal()
            values = 100 * (1 + i) * factor * shared * shift * (1 + JITTER * rng.standard_normal(REPEATS))
            rows.append(row(kernel=kernel, shape=shape, run=name, night=night, latencies=list(values)))
    return rows


def _write(results: Path, rows: list) -> None:
    """The rows as a dataset file of the results layout, with the columns a report reads."""
    records = [{c: getattr(r, c) for c in COLUMNS} for r in rows]
    target = results / object_key(rows[0].platform, rows[0].run_date, rows[0].flow_run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records), target)


def _compare(results: Path, cwd: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "compare", "--results", str(results), "--runs", "run-a",
         "run-b", "--format", "json"],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 1, 3), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_unchanged_first_compare_is_never_a_regression(tmp_path, seed):
    rng = np.random.default_rng(seed)
    _write(tmp_path / "results", _run(rng, "run-a", 0, None) + _run(rng, "run-b", 1, None))
    code, document = _compare(tmp_path / "results", tmp_path)
    assert code in (0, 3), [p for p in document["points"] if p["outcome"] == "slower"]
    assert any("compared for the first time" in note for note in document["notes"])


@pytest.mark.parametrize("seed", [4, 5])
def test_one_kernel_made_fifteen_percent_slower_is_called_on_exactly_its_points(tmp_path, seed):
    rng = np.random.default_rng(seed)
    _write(tmp_path / "results", _run(rng, "run-a", 0, None) + _run(rng, "run-b", 1, "matmul"))
    code, document = _compare(tmp_path / "results", tmp_path)
    slower = {(p["key"]["kernel"], p["key"]["shape"]) for p in document["points"] if p["outcome"] == "slower"}
    assert code == 1 and slower == {("matmul", shape) for shape in SHAPES}


def test_the_same_rows_without_the_prior_would_call_an_unchanged_point_slower():
    """Why the prior: judged on its repeats alone, 1% run shifts make unchanged points look changed."""
    from kernelsweep.report.stats import Rule, decide, effect

    rng = np.random.default_rng(6)
    calls = 0
    for _ in range(20):
        a, b = _run(rng, "run-a", 0, None), _run(rng, "run-b", 1, None)
        effects = [effect([x.sample()], [y.sample()]) for x, y in zip(a, b, strict=True)]
        calls += any(v == "slower" for v, _, _ in decide(effects, Rule()))
    assert calls >= 2  # the review's 20% of 36-point compares, here at least 2 of 20
