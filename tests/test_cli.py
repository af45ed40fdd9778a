"""The CLI as a user runs it: real subprocesses, real exit codes, real terminal output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(home)
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"  # a fresh database on a busy host
    env["PYTHONPATH"] = str(Path(__file__).parent)
    return env


def _run(args, env, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


SPEC = """
name = "cli"
platforms = ["trn2"]
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [4096], free_size = [1, 32] }
"""


def test_run_writes_results_and_prints_a_clean_summary(tmp_path, cli_env):
    (tmp_path / "spec.toml").write_text(SPEC)
    proc = _run(["run", "spec.toml", "--results", "out"], cli_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "kernelsweep results (simulated)" in proc.stdout
    assert proc.stdout.count("vector_add") == 2 and "n=4096,partition_size=128,free_size=32" in proc.stdout
    assert "running on the simulated toolchain" in proc.stderr
    for noise in ("Traceback", "ERROR", "CancelledError", "telemetry", "database is locked"):
        assert noise not in proc.stderr + proc.stdout
    files = list((tmp_path / "out" / "v1" / "platform=trn2").glob("run_date=*/*.parquet"))
    assert len(files) == 1
    rows = pq.read_table(files[0]).to_pylist()
    assert len(rows) == 2 and all(r["status"] == "ok" and r["is_simulation"] for r in rows)


def test_run_exits_1_when_a_point_fails_and_still_writes(tmp_path, cli_env):
    spec = (
        SPEC
        + '\n[[kernels]]\nkernel = "kernels.faulty:crashes_on_device"\ndtypes = ["float32"]\ngrid = { n = [1024] }\n'
    )
    (tmp_path / "spec.toml").write_text(spec)
    proc = _run(["run", "spec.toml", "--results", "out"], cli_env, tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "failed: CaptureError" in proc.stdout and "1 of 3 points failed" in proc.stderr
    files = list((tmp_path / "out").rglob("*.parquet"))
    assert len(files) == 1 and len(pq.read_table(files[0])) == 3


def test_run_with_a_bad_spec_exits_2_and_writes_nothing(tmp_path, cli_env):
    (tmp_path / "spec.toml").write_text(SPEC.replace("free_size = [1, 32]", "partition_size = [256]"))
    proc = _run(["run", "spec.toml", "--results", "out"], cli_env, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "number of partitions 256 exceeds" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_extract_prints_seed_000s_numbers_in_normalised_units(tmp_path, cli_env):
    proc = _run(["extract", str(FIXTURES / "profiles" / "seed000_full.json")], cli_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert round(metrics["total_time_us"], 2) == 45.26
    assert round(metrics["tensor_engine_active_time_us"], 2) == 20.70
    assert metrics["tensor_engine_active_time_percent"] == pytest.approx(45.74)
    assert metrics["hardware_flops"] == 427_819_008 and metrics["neuroncore_cycle_count"] == 54307


def test_extract_on_a_missing_file_exits_2(tmp_path, cli_env):
    proc = _run(["extract", "nope.json"], cli_env, tmp_path)
    assert proc.returncode == 2 and "nope.json" in proc.stderr and proc.stderr.count("\n") == 1


def test_toolchain_neuron_without_the_sdk_exits_2_before_any_work(tmp_path, cli_env):
    (tmp_path / "spec.toml").write_text(SPEC)
    proc = _run(["run", "spec.toml", "--results", "out", "--toolchain", "neuron"], cli_env, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--toolchain neuron: missing neuronx-cc" in proc.stderr
    assert not (tmp_path / "out").exists()
