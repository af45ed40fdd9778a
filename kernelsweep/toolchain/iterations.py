"""Many executions of one NEFF timed in one process of the runtime's own benchmark tool.

A profiled capture gives one latency per tool launch, so 200 samples would cost 200 launches
(nki-samples#95 raised its iterations to 200 "to reduce variance"). The Neuron runtime's Python API
times executions itself: `nrtpy.NrtpyModel.benchmark(inputs, warmup_iter, benchmark_iter,
mode="device")` returns every timed iteration's device-side execution time (`durations_ms`,
NeuronCore execution time from device-side tracing: SDK docs, neuron-runtime/nrtpy/model.rst).
`capture.iterations = N` runs one such process per point, under the capture's NeuronCore lease, in
the interpreter that has nrtpy (KERNELSWEEP_NRTPY_PYTHON: nrtpy and nki cannot share one
environment); the simulated toolchain runs its stand-in module (kernelsweep.sim.nrtpy) the same way.
The samples are the row's `iteration_latencies_us`, which `compare` and `report` test in place of
the captures' repeats. No host clock is read: every figure is the runtime's own.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import CaptureError
from kernelsweep.toolchain.failures import capture_failure
from kernelsweep.toolchain.parent_death import bootstrap
from kernelsweep.toolchain.prefork_client import forked_argv
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.tracing.interpreter import package_folder

WARMUP_ITERATIONS = 5  # nrtpy's own default warm-up: the first executions load the GpSimd library (aws-neuron-sdk#994)
JOB_FILE, RESULT_FILE = "bench-job.json", "bench-result.json"
# Run with -c under the runtime's interpreter, which need not have kernelsweep's dependencies.
WORKER_MODULE = "kernelsweep.toolchain.iteration_worker"
BOOTSTRAP = bootstrap(WORKER_MODULE)


@dataclass(frozen=True)
class IterationTiming:
    """Executions timed by the runtime in one process; `note` says why there are none."""

    latencies_us: tuple[float, ...]
    tool: str | None
    note: str | None = None

    @property
    def median_us(self) -> float | None:
        return statistics.median(self.latencies_us) if self.latencies_us else None

    @property
    def p99_us(self) -> float | None:
        if not self.latencies_us:
            return None
        ordered = sorted(self.latencies_us)
        position = (len(ordered) - 1) * 0.99
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def time_iterations(
    toolchain: Toolchain,
    neff: Path,
    inputs: Mapping[str, tuple[Path, tuple[int, ...], str]],
    workdir: Path,
    *,
    iterations: int,
    visible_cores: str,
    lnc: int,
    timeout_seconds: float,
) -> IterationTiming:
    """`iterations` executions after WARMUP_ITERATIONS, in one benchmark process on the leased core.
    `inputs`: name -> (raw input file, shape, dtype). A host without the runtime's Python API gets
    no samples and a note, not a failed point; a failing run is a CaptureError, classified as captures are."""
    if toolchain.benchmark_python is None:
        return IterationTiming((), None, "no iterations: no Python with nrtpy here (set KERNELSWEEP_NRTPY_PYTHON)")
    workdir.mkdir(parents=True, exist_ok=True)
    job = {
        "module": toolchain.benchmark_module,
        "neff": str(neff),
        "inputs": {name: {"file": str(f), "shape": list(s), "dtype": d} for name, (f, s, d) in inputs.items()},
        "warmup": WARMUP_ITERATIONS,
        "iterations": iterations,
        "result": str(workdir / RESULT_FILE),
    }
    (workdir / JOB_FILE).write_text(json.dumps(job))
    job_file = str(workdir / JOB_FILE)
    argv = forked_argv(toolchain.env, toolchain.benchmark_python, WORKER_MODULE, job_file) or [
        toolchain.benchmark_python, "-c", BOOTSTRAP, str(package_folder(workdir)), job_file
    ]  # fmt: skip
    env = {**toolchain.env, "NEURON_RT_VISIBLE_CORES": visible_cores, "NEURON_LOGICAL_NC_CONFIG": str(lnc)}
    result = run_tool(argv, cwd=workdir, env=env, timeout_seconds=timeout_seconds)
    answer = workdir / RESULT_FILE
    if result.timed_out or result.returncode != 0 or not answer.is_file():
        raise capture_failure(result, toolchain.benchmark_module)
    found = json.loads(answer.read_text())
    latencies = tuple(float(ms) * 1e3 for ms in found["durations_ms"])
    if len(latencies) != iterations:
        raise CaptureError(
            f"{toolchain.benchmark_module} timed {len(latencies)} executions, not the {iterations} asked for",
            error_class="MissingOutput",
            argv=argv,
        )
    return IterationTiming(latencies, found.get("tool") or toolchain.benchmark_module)
