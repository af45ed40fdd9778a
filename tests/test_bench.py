"""`kernelsweep bench` and the iterations pass (kernelsweep.bench, kernelsweep.toolchain.iterations): one point
through the same stages and caches as a sweep, as one JSON object; N executions timed in one process
of the runtime's benchmark tool (the simulator's stand-in for nrtpy here), whose samples compare uses."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from report_rows import row
from stage_context import point, sim_context

from kernelsweep.report.compare import compare_runs
from kernelsweep.sim.nrtpy import LAUNCHES_FILE
from kernelsweep.stages import capture_stage, compile_stage, inputs_stage, trace_stage
from kernelsweep.toolchain.iterations import WORKER_MODULE
from kernelsweep.toolchain.process import recording


def test_a_row_with_iterations_is_compared_on_them():
    """One capture a side cannot bound a 5% change; 200 executions timed in one process can (the
    run's shift stays unknown with one run a side, so the point is a suspect, not a verdict)."""
    rng = np.random.default_rng(7)
    a, b = row(run="a", night=0, latencies=[100.0]), row(run="b", night=1, latencies=[105.0])
    alone = compare_runs([a, b], "a", "b").points[0]
    assert alone.outcome == "inconclusive" and alone.effect is not None and alone.effect.high == math.inf
    timed_a = dataclasses.replace(a, iteration_latencies_us=list(100 * (1 + 0.01 * rng.standard_normal(200))))
    timed_b = dataclasses.replace(b, iteration_latencies_us=list(105 * (1 + 0.01 * rng.standard_normal(200))))
    assert timed_b.sample().n == 200 and timed_b.sample().median == pytest.approx(105, rel=0.01)
    judged = compare_runs([timed_a, timed_b], "a", "b").points[0]
    assert judged.outcome == "inconclusive" and judged.suspect and judged.effect is not None
    assert judged.effect.repeats == (200, 200) and 1.02 < judged.effect.low < judged.effect.high < 1.08


@pytest.mark.slow
def test_200_iterations_are_200_samples_from_one_tool_process(tmp_path):
    ctx, p = sim_context(tmp_path, iterations=200), point("mlp")
    compiled = compile_stage(ctx, p, trace_stage(ctx, p))
    inputs = inputs_stage(ctx, p)
    with recording() as runs:
        captured = capture_stage(ctx, p, compiled, inputs)
    timers = [r for r in runs if any(WORKER_MODULE in arg for arg in r.argv)]  # forked, or its bootstrap code
    assert len(timers) == 1 and timers[0].returncode == 0  # one benchmark process, beside the one capture
    launches = [json.loads(line) for line in (tmp_path / "sim" / LAUNCHES_FILE).read_text().splitlines()]
    assert len(launches) == 1 and launches[0]["iterations"] == 200
    timed = captured.iterations
    assert timed is not None and len(timed.latencies_us) == 200 and len(set(timed.latencies_us)) == 200
    assert timed.tool == "nrtpy (simulated)" and timed.median_us is not None and timed.p99_us is not None
    assert min(timed.latencies_us) < timed.median_us < timed.p99_us <= max(timed.latencies_us)


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    tests = str(Path(__file__).parent)  # the failing kernel definitions under tests/kernels
    env = {**os.environ, "KERNELSWEEP_STATE_DIR": str(cwd / "state"), "PYTHONPATH": tests}
    command = [sys.executable, "-m", "kernelsweep.flows.cli", "bench", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_bench_prints_one_json_object_reuses_the_caches_and_exits_as_run(tmp_path):
    shape = ("matmul", "--shape", "M=256,K=512,N=512", "--toolchain", "sim", "--json", "--results", "results")
    first = _bench(*shape, "--iterations", "50", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    found = json.loads(first.stdout)
    assert first.stdout.count("\n") == 1 and found["status"] == "ok" and found["simulated"] is True
    assert found["correctness"]["correct"] is True and found["bound"]["engine"] in ("tensor", "overhead")
    assert len(found["iterations"]["samples_us"]) == 50 and found["latency_us"]["repeats"] == 1
    assert found["compile"]["cache_hit"] is False and found["compile"]["peak_rss_bytes"] > 0
    again = json.loads(_bench(*shape, "--iterations", "50", cwd=tmp_path).stdout)
    assert again["trace"]["cache_hit"] and again["compile"]["cache_hit"] and again["compile"]["seconds"] is None
    assert 0 < again["tool_seconds"]

    compared = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "compare", "--results", "results", "--runs", "previous",
         "latest", "--format", "json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    [judged] = json.loads(compared.stdout)["points"]
    assert judged["repeats"] == [50, 50]  # the iterations are the samples tested

    bad = _bench("matmul", "--shape", "M=256;K=512", "--toolchain", "sim", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "is not AXIS=INTEGER" in bad.stderr
    crashed = _bench("kernels.faulty:crashes_on_device", "--shape", "n=1024", "--toolchain", "sim", cwd=tmp_path)
    assert crashed.returncode == 1 and json.loads(crashed.stdout)["error"]["stage"] == "capture"
