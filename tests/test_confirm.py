"""`compare --confirm`: a suspect decided by A's and B's NEFFs captured again, interleaved on one core.

End to end (slow): two real one-point runs (`kernelsweep bench` on the simulated toolchain, its tools
real subprocesses), B's compiler emitting code 4% slower. The run-level noise is off, so the plain
compare's suspicion comes from the change, and the seeded noise makes every capture repeatable.
The rest (default stage): rows written directly, and the deciding loop fed drawn rounds.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from report_rows import row

from kernelsweep.report.compare import compare_runs
from kernelsweep.report.index import Indexed
from kernelsweep.report.interleaved import FIRST_LOOK, Budget, confirm, confirm_point
from kernelsweep.report.load import COLUMNS
from kernelsweep.results import reader
from kernelsweep.results.writer import object_key
from kernelsweep.stores.artifacts import LocalArtifactStore

QUIET = {
    "KERNELSWEEP_SIM_RUN_NOISE": "0",
    "KERNELSWEEP_SIM_SHARED_NOISE": "0",
    "KERNELSWEEP_SIM_HOST_NOISE": "0",
    "KERNELSWEEP_SIM_NOISE_SEED": "34",
}
SLOWER = {"KERNELSWEEP_SIM_COMPILER_VERSION": "2.22.41000.0", "KERNELSWEEP_SIM_COMPILER_SLOWDOWN": "vector_add:1.04"}


def _env(state: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSWEEP_SIM_")}
    return {**env, **QUIET, "KERNELSWEEP_SIM_STATE": str(state / "sim"), "KERNELSWEEP_LOCK_DIR": str(state / "leases"),
            **(extra or {})}  # fmt: skip


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelsweep.flows.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A results folder with run A and, after it, run B of one vector_add point; the artifact store beside it."""
    where = tmp_path_factory.mktemp("confirm")
    for extra in ({}, SLOWER):
        done = _cli("bench", "vector_add", "--shape", "n=4096", "--toolchain", "sim", "--repeats", "7",
                    "--results", str(where / "results"), "--artifacts", str(where / "artifacts"),
                    env=_env(where, extra), cwd=where)  # fmt: skip
        assert done.returncode == 0, done.stderr
    return where


@pytest.fixture
def dataset(runs: Path, tmp_path: Path) -> Path:
    """A copy of the results (the NEFFs stay in the shared store: their URIs name it)."""
    shutil.copytree(runs / "results", tmp_path / "results")
    return tmp_path / "results"


def _compare(results: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = _cli("compare", "--results", str(results), "--runs", "previous", "latest", "--format", "json", *extra,
                env=_env(tmp_path), cwd=tmp_path)  # fmt: skip
    return done, json.loads(done.stdout) if done.stdout.strip() else {}


def _confirmation_rows(results: Path) -> list[dict]:
    table = reader.read(str(results))
    return table.filter(pc.equal(table.column("status"), "confirmation")).to_pylist()


@pytest.mark.slow
def test_confirm_decides_the_point_the_plain_compare_left_suspect(dataset, tmp_path):
    plain, before = _compare(dataset, tmp_path)
    [point] = before["points"]
    assert plain.returncode == 3 and point["outcome"] == "inconclusive" and point["suspect"], plain.stdout
    done, after = _compare(dataset, tmp_path, "--confirm", "--toolchain", "sim")
    [point] = after["points"]
    assert done.returncode == 1, done.stderr
    assert point["outcome"] == "slower" and point["why"].startswith("confirmed:"), point
    assert 1.02 < point["ratio"] < 1.07  # the 4% the compiler added, measured again
    cost = next(note for note in after["notes"] if "re-measured" in note)
    rows = _confirmation_rows(dataset)
    assert f"cost {sum(len(r['latencies_us']) for r in rows)} repeats" in cost


@pytest.mark.slow
def test_an_exhausted_budget_exits_3_and_names_the_budget_that_would_decide(dataset, tmp_path):
    done, after = _compare(dataset, tmp_path, "--confirm", "--toolchain", "sim", "--budget-repeats", "6")
    [point] = after["points"]
    assert done.returncode == 3, done.stderr
    assert point["outcome"] == "inconclusive" and point["suspect"]
    assert "after 3 interleaved rounds (6 repeats" in point["why"] and "would decide it" in point["why"]
    [wanted] = [note for note in after["notes"] if "would decide them" in note]
    needed = int(wanted.split("--budget-repeats ")[1].split()[0])
    assert needed > 6
    again, decided = _compare(dataset, tmp_path, "--confirm", "--toolchain", "sim", "--budget-repeats", str(needed))
    assert again.returncode == 1 and decided["points"][0]["outcome"] == "slower", decided["points"]


@pytest.mark.slow
def test_confirmation_rows_are_in_the_dataset_and_report_reads_them(dataset, tmp_path):
    done, after = _compare(dataset, tmp_path, "--confirm", "--toolchain", "sim")
    assert done.returncode == 1, done.stderr
    rows = _confirmation_rows(dataset)
    assert (
        len(rows) == 2 and len({r["flow_run_id"] for r in rows}) == 1 and rows[0]["flow_run_id"].startswith("confirm-")
    )
    sides = {r["error_message"].split(":")[0]: r for r in rows}
    assert set(sides) == {"side A", "side B"}
    assert len(sides["side A"]["latencies_us"]) == len(sides["side B"]["latencies_us"]) >= FIRST_LOOK
    assert all(after["title"].removeprefix("latency: ") in r["error_message"] for r in rows)
    report = _cli("report", "--results", str(dataset), "--format", "json", env=_env(tmp_path), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    shown = json.dumps(json.loads(report.stdout))
    assert rows[0]["flow_run_id"] not in shown  # a confirmation is no run of the point
    plain, again = _compare(dataset, tmp_path)
    assert plain.returncode == 3 and again["points"][0]["suspect"]  # the plain compare is unchanged by them


def _suspect_rows(tmp_path: Path, uri: str | None, sha: str | None, simulated: bool = True) -> Path:
    """Two runs of one point written directly, B 10% slower (a suspect), linking the NEFF given."""
    results = tmp_path / "results"
    for night, (run, level) in enumerate((("run-a", 100.0), ("run-b", 110.0))):
        made = row(run=run, night=night, latencies=list(level + np.arange(7.0)))
        record = {**{c: getattr(made, c) for c in COLUMNS}, "neff_uri": uri, "neff_sha256": sha}
        record.update(is_simulation=simulated, kernel_ref="kernelsweep.kernels.vector_add:vector_add")
        target = results / object_key(made.platform, made.run_date, run)
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist([record]), target)
    [point] = compare_runs(Indexed(str(results)), "run-a", "run-b").points
    assert point.suspect, point.why
    return results


def _refused(results: Path, tmp_path: Path) -> str:
    """The one line a refused confirmation prints; nothing captured, nothing written."""
    done, _ = _compare(results, tmp_path, "--confirm", "--toolchain", "sim")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--confirm" in lines[0], done.stderr
    assert _confirmation_rows(results) == []
    return lines[0]


@pytest.mark.parametrize("broken", ["unlinked", "gone from the store"])
def test_a_row_whose_neff_cannot_be_had_is_one_line_and_exit_2(tmp_path, broken):
    missing = "ab" * 32  # named as the store names its files, in a store that never held it
    uri, sha = (None, None) if broken == "unlinked" else (f"file://{tmp_path}/artifacts/sha256/ab/{missing}", missing)
    assert "NEFF" in _refused(_suspect_rows(tmp_path, uri, sha), tmp_path)


def test_rows_measured_on_a_device_are_not_confirmed_on_the_simulator(tmp_path):
    (tmp_path / "neff").write_bytes(b"a NEFF")
    ref = LocalArtifactStore(tmp_path / "artifacts").put_file(tmp_path / "neff")
    line = _refused(_suspect_rows(tmp_path, ref.uri, ref.sha256, simulated=False), tmp_path)
    assert "measured on a device" in line


def _rounds(change: float, seed: int, jitter: float = 0.01):
    rng = np.random.default_rng(seed)

    def measure() -> tuple[float, float]:
        a, b = 1 + jitter * rng.standard_normal(2)
        return 100 * a, 100 * (1 + change) * b

    return measure


def _still() -> float:
    return 0.0


@pytest.mark.parametrize(("change", "verdict"), [(0.10, "slower"), (-0.10, "faster"), (0.0, "same")])
def test_interleaved_rounds_decide_a_clear_change_or_its_absence(change, verdict):
    decided = confirm_point(_rounds(change, 1), 0.02, 0.05, rounds=60, seconds=math.inf, clock=_still)
    assert decided.outcome == verdict, decided.why
    assert decided.repeats == len(decided.a_us) * 2 < 120  # decided before the budget ran out


def test_a_change_on_the_threshold_is_never_decided_slower_more_often_than_alpha():
    """The looks spend alpha: a true +2% (exactly the threshold) is called slower at most 5% of the time."""
    calls = sum(
        confirm_point(_rounds(0.02, seed), 0.02, 0.05, rounds=60, seconds=math.inf, clock=_still).outcome == "slower"
        for seed in range(300)
    )
    assert calls <= 0.05 * 300


def test_the_budget_is_shared_between_the_suspects():
    points = [nullcontext(_rounds(0.021, seed)) for seed in range(3)]
    decided = confirm(points, [0.02] * 3, 0.05, Budget(36, math.inf), _still)
    assert [d.repeats for d in decided] == [12, 12, 12]
    assert all(d.outcome == "inconclusive" and d.rounds_needed and d.rounds_needed > 6 for d in decided)


def test_the_seconds_budget_stops_the_rounds():
    """A round takes a second here: ten seconds are ten rounds, judged when the time ran out."""
    now, draw = [0.0], _rounds(0.021, 1)

    def measure() -> tuple[float, float]:
        now[0] += 1.0
        return draw()

    decided = confirm_point(measure, 0.02, 0.05, rounds=500, seconds=10, clock=lambda: now[0])
    assert decided.outcome == "inconclusive" and len(decided.a_us) == 10, decided.why
    assert "after 10 interleaved rounds (20 repeats, 10.0 s)" in decided.why
