"""Stand-in for the Neuron runtime's Python API (`nrtpy`) as kernelsweep's benchmark worker uses it:
`NrtpyModel.load_from_neff`, `NrtpyTensor.from_numpy`, `NrtpyModel.benchmark` -> `BenchmarkResult`
with `durations_ms` (SDK docs, neuron-runtime/nrtpy/model.rst).

Loading does what the simulated runtime's capture does (sim.capture): the NEFF must be the
simulator's and match the platform and LNC in force, the process holds every physical core behind
NEURON_RT_VISIBLE_CORES until it exits (another holder gets the NRT busy error), and inputs must be
the NEFF's by name and size. Each execution's time is the performance model's, with its own
per-execution noise and the run's shift (sim.noise), so N iterations are N draws from one run; the
emulated wall time (load plus every execution) is recorded and slept as a capture's is. Each
process appends one line to `<state dir>/benchmark-launches.jsonl` (its pid and iterations), so a
test can count the processes a timing pass cost.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelsweep.sim import views
from kernelsweep.sim.capture import LOAD_SECONDS, hold, load, noise_salt, visible_physical_cores
from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.faults import take
from kernelsweep.sim.latency import CAPTURE, emulate, ir_point_key
from kernelsweep.sim.model import predict
from kernelsweep.sim.noise import run_factor
from kernelsweep.sim.nrt import RuntimeFailure, busy, nrt

TOOL = "nrtpy (simulated)"
LAUNCHES_FILE = "benchmark-launches.jsonl"
_held = ExitStack()  # the cores this process holds, until it exits (as the runtime holds them)


@dataclass(frozen=True)
class BenchmarkResult:
    """All timing values in milliseconds, as nrtpy's."""

    mean_ms: float
    min_ms: float
    max_ms: float
    std_dev_ms: float
    iterations: int
    warmup_iterations: int
    durations_ms: list[float] = field(default_factory=list)


@dataclass
class NrtpyTensor:
    array: Any
    name: str | None = None

    @classmethod
    def from_numpy(cls, array: Any, name: str | None = None, core_id: int = 0) -> NrtpyTensor:
        return cls(array, name)


@dataclass
class NrtpyModel:
    path: Path
    ir: dict
    config: SimConfig

    @classmethod
    def load_from_neff(cls, neff_path: str | Path, name: str | None = None, core_id: int = 0) -> NrtpyModel:
        config = SimConfig.from_env()
        lnc = config.lnc_for(os.environ.get("NEURON_LOGICAL_NC_CONFIG"))
        _, ir = load(str(neff_path), config, lnc)
        requested = os.environ.get("NEURON_RT_VISIBLE_CORES", "all")
        if take(config.state_dir, "capture-busy", config.faults.capture_busy):
            raise busy(f"nc{requested}-nc{requested}")
        hold(_held, config, visible_physical_cores(config, lnc), f"nc{requested}-nc{requested}")
        return cls(Path(neff_path), ir, config)

    def benchmark(
        self,
        inputs: dict[str, NrtpyTensor],
        outputs: Any = None,
        warmup_iter: int = 5,
        benchmark_iter: int = 5,
        mode: str = "device",
    ) -> BenchmarkResult:
        if mode not in ("device", "host"):
            raise ValueError(f"mode must be 'device' or 'host', not {mode!r}")
        if benchmark_iter < 1:
            raise ValueError("benchmark_iter must be at least 1")
        self._check(inputs)
        key = ir_point_key(self.ir)
        salt = noise_salt(self.config, hashlib.sha256(self.path.read_bytes()).hexdigest()).hex()
        factor = run_factor(self.config, key)
        workload = views.workload(self.ir)
        runs = range(warmup_iter + benchmark_iter)
        seconds = [predict(workload, f"{salt}:{i}", run_factor=factor).total for i in runs]
        emulate(self.config.state_dir, CAPTURE, key, LOAD_SECONDS + sum(seconds), self.config.time_scale)
        self._record(benchmark_iter)
        timed = [s * 1e3 for s in seconds[warmup_iter:]]
        mean = sum(timed) / len(timed)
        spread = (sum((t - mean) ** 2 for t in timed) / len(timed)) ** 0.5
        return BenchmarkResult(mean, min(timed), max(timed), spread, benchmark_iter, warmup_iter, timed)

    def _check(self, inputs: dict[str, NrtpyTensor]) -> None:
        expected = {t["name"]: t["bytes"] for t in self.ir["inputs"]}
        if set(inputs) != set(expected):
            wrong = f"inputs {sorted(inputs)} are not the NEFF's {sorted(expected)}"
            raise RuntimeFailure(nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: {wrong}"))
        for name, tensor in inputs.items():
            if tensor.array.nbytes != expected[name]:
                wrong = f"{name} has {tensor.array.nbytes} bytes, expected {expected[name]}"
                raise RuntimeFailure(nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: {wrong}"))

    def _record(self, iterations: int) -> None:
        line = json.dumps({"pid": os.getpid(), "iterations": iterations, "point": ir_point_key(self.ir)})
        fd = os.open(self.config.state_dir / LAUNCHES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
