"""Compile cost (kernelsweep.toolchain.compile_cost): the peak memory and CPU a compile took, a cap that turns a
runaway compile into one CompileOOM row, compile slots from measured peaks, and compile-cost verdicts
across compiler versions with the latency statistics (`compare --metric`)."""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from report_rows import row
from stage_context import point, sim_context

from kernelsweep.errors import CompileError
from kernelsweep.report.compare import compare_versions
from kernelsweep.report.measures import as_measure, measure
from kernelsweep.results.rows import PointRecord, build_row
from kernelsweep.stages import trace_stage
from kernelsweep.toolchain.compile_cost import COMPILE_MEMORY_BYTES, PEAK_HEADROOM, CompilePeaks, default_slots

GIB = 2**30


def test_the_ledger_keeps_the_largest_peak_per_compiler_version(tmp_path):
    peaks = CompilePeaks(tmp_path)
    assert peaks.peak("2.21") is None
    for value in (3 * GIB, 5 * GIB, 4 * GIB):
        peaks.record("2.21", value)
    peaks.record("2.22", GIB)
    peaks.record("2.22", None)  # a cached compile measured nothing
    assert (peaks.peak("2.21"), peaks.peak("2.22"), CompilePeaks(tmp_path).peak("2.22")) == (5 * GIB, GIB, GIB)
    peaks.path.write_text("not json")
    assert peaks.peak("2.21") is None  # a damaged ledger is no ledger, never a failed run


def test_compile_slots_default_from_the_measured_peak_with_headroom():
    host = 64 * GIB
    assert default_slots(cores=32, host_memory_bytes=host, peak_bytes=None) == host // COMPILE_MEMORY_BYTES
    assert default_slots(cores=32, host_memory_bytes=host, peak_bytes=8 * GIB) == int(host // (8 * GIB * PEAK_HEADROOM))
    assert default_slots(cores=4, host_memory_bytes=host, peak_bytes=GIB) == 4  # cores bound it first
    assert default_slots(cores=4, host_memory_bytes=GIB, peak_bytes=16 * GIB) == 1  # never zero


def _nights(metric_values: dict[str, list[float]]) -> list:
    """Rows of one point over nights, each compiled once per night (a fresh store each run)."""
    rows = []
    for version, values in metric_values.items():
        for night, value in enumerate(values):
            made = row(run=f"{version}-{night}", night=len(rows), compiler=version)
            rows.append(dataclasses.replace(made, compile_seconds=value, compile_peak_rss_bytes=int(value * 2**30)))
    return rows


def test_compile_seconds_across_compiler_versions_get_latency_verdicts_and_exit_codes():
    slower = _nights({"2.21": [40.1, 39.8, 40.3, 40.0], "2.22": [52.2, 51.8, 52.5, 52.0]})
    comparison = compare_versions(as_measure(slower, measure("compile_seconds")), "compiler", "2.21", "2.22")
    [judged] = comparison.points
    assert judged.outcome == "slower" and comparison.exit_code == 1
    assert judged.a_us == pytest.approx(40.05, rel=0.01) and judged.b_us == pytest.approx(52.1, rel=0.01)
    same = _nights({"2.21": [40.1, 39.8, 40.3, 40.0], "2.22": [40.0, 40.2, 39.9, 40.1]})
    memory = compare_versions(as_measure(same, measure("compile_peak_rss")), "compiler", "2.21", "2.22")
    assert memory.points[0].outcome == "same" and memory.exit_code == 0


def test_a_cached_compile_measured_nothing_and_is_left_out():
    rows = _nights({"2.21": [40.0, 40.5]})
    cached = dataclasses.replace(rows[0], row_id="cached", compile_seconds=None, compile_peak_rss_bytes=None)
    kept = as_measure([*rows, cached], measure("compile_seconds"))
    assert [r.row_id for r in kept] == [r.row_id for r in rows] and kept[0].latencies_us == [40.0]


@pytest.mark.slow
def test_a_compile_past_its_cap_is_one_compile_oom_row_and_the_host_keeps_its_memory(tmp_path):
    """The simulated compiler allocates 2 GiB under a 1 GiB cap: the worker's allocation fails, the
    point is one failed row, CompileOOM, never retried, and this process never held that memory."""
    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_COMPILE_MEMORY": "2G"})
    capped = dataclasses.replace(ctx, compile_memory_limit_bytes=GIB)
    p = point()
    record = PointRecord(point=p, started_at=datetime.now(UTC))
    with pytest.raises(CompileError) as failed:
        trace_stage(capped, p)
    assert failed.value.error_class == "CompileOOM" and failed.value.retryable is False
    record.error, record.error_stage = failed.value, "trace"
    made = build_row(record, flow_run_id="r", toolchain="sim", is_simulation=True, versions=ctx.versions)
    assert (made.status, made.error_class) == ("failed", "CompileOOM")
    assert "\n" not in made.error_message and "cap of 1 GiB (execution.compile_memory_limit_gb)" in made.error_message
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 < GIB


@pytest.mark.slow
def test_the_recorded_peak_is_within_ten_percent_of_what_the_compiler_allocated(tmp_path):
    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_COMPILE_MEMORY": "2G"})
    traced = trace_stage(ctx, point())
    cost = traced.compile_cost
    assert cost is not None and cost.peak_rss_bytes is not None and cost.cpu_seconds is not None
    assert 2 * GIB <= cost.peak_rss_bytes <= 1.1 * 2 * GIB
    assert cost.cpu_seconds > 0 and cost.memory_limit_bytes is None
    ledger = CompilePeaks(tmp_path / "ledger")
    ledger.record(ctx.versions.compiler, cost.peak_rss_bytes)
    assert ledger.peak(ctx.versions.compiler) == cost.peak_rss_bytes


@pytest.mark.slow
def test_a_sweep_with_a_runaway_compile_prints_one_line_and_writes_one_row(tmp_path, server_client_env):
    """Through `kernelsweep run`: exit 1 (a point failed), the row's one-line reason, nothing else."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "oom"\nplatforms = ["trn2"]\ntoolchain = "sim"\n[execution]\ncompile_memory_limit_gb = 1\n'
        '[[kernels]]\nkernel = "vector_add"\ngrid = { n = [2048], partition_size = [128], free_size = [1] }\n'
        'dtypes = ["float32"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # Prefect as a user has it
    env |= server_client_env  # the session's server: the run starts none of its own
    env |= {"KERNELSWEEP_SIM_COMPILE_MEMORY": "2G", "KERNELSWEEP_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "run", str(spec)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 1, done.stderr
    assert "failed: CompileOOM" in done.stdout and "Traceback" not in done.stderr
    from kernelsweep.results import reader

    rows = reader.read(str(tmp_path / "results")).to_pylist()
    assert len(rows) == 1 and rows[0]["error_class"] == "CompileOOM" and rows[0]["compile_peak_rss_bytes"] is None
    assert "\n" not in rows[0]["error_message"]
