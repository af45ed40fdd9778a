"""What the throughput benchmark sweeps, on which simulated host, and the bound it is held to.

The sweep is seed 000's MLP around its measured shape (b=1 s=128 h=1024 i=512 compiles in ~4.3 s):
2 dtypes x 2 sequence lengths x h x i, so modelled compiles are 4.2-4.9 s and captures ~1.2 s
(the runtime's load plus `num_exec` executions), times the time scale.

The bound comes from the simulator's own records of what it was configured to sleep (sim.latency),
per flow run where the flow runs run one after another (a sweep's shards), over the whole host where
they run at once.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.sim.config import sim_env
from kernelsweep.sim.latency import CAPTURE, COMPILE, lower_bound, point_key, read_latencies
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point

HERE = Path(__file__).resolve().parent
WORKER_UNIT = HERE.parent / "deployments" / "kernelsweep-worker.service"


def worker_env() -> dict[str, str]:
    """The Prefect settings a fleet worker's flow runs get from the shipped systemd unit (its
    `Environment=PREFECT_...` lines; the API URL is the benchmark's own): what a shard on a fleet host
    costs, Prefect's default log level and the kernelsweep logger sent to the API included."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_"))}
    for line in WORKER_UNIT.read_text().splitlines():
        name, _, value = line.removeprefix("Environment=").partition("=")
        if line.startswith("Environment=PREFECT_") and name != "PREFECT_API_URL":
            env[name] = value
    return env


def mlp_spec(points: int, root: Path, compile_slots: int, name: str = "bench", per_flow_run: int = 200) -> SweepSpec:
    """Exactly `points` points when `points` is 4 x a power of two (up to 4096)."""
    per_dtype_seq = points // 4
    h_count = 2 ** math.ceil(math.log2(max(per_dtype_seq, 1)) / 2)
    i_count = max(per_dtype_seq // h_count, 1)
    return parse_spec(
        {
            "name": f"{name}-{points}",
            "platforms": ["trn2"],
            "toolchain": "sim",
            "results": str(root / "results"),
            "artifacts": str(root / "artifacts"),
            "execution": {"compile_slots": compile_slots, "max_points_per_flow_run": per_flow_run},
            "kernels": [
                {
                    "kernel": "kernelsweep.kernels.mlp:mlp",
                    "dtypes": ["bfloat16", "float16"],
                    "grid": {
                        "s": [128, 256],
                        "h": [1024 + 128 * k for k in range(h_count)],
                        "i": [512 + 128 * k for k in range(i_count)],
                    },
                }
            ],
        }
    )


@dataclass(frozen=True)
class Host:
    """A simulated trn2 host: its logical NeuronCores (at LNC=2), compile slots and time scale."""

    cores: int
    compile_slots: int
    time_scale: float

    def env(self, root: Path) -> dict[str, str]:
        return {
            **sim_env(platform="trn2", cores=self.cores, time_scale=float(self.time_scale), state_dir=root / "sim"),
            "KERNELSWEEP_LOCK_DIR": str(root / "leases"),
        }


@dataclass(frozen=True)
class Bound:
    seconds: float
    compile_seconds: float  # configured (slept) sums over the run
    capture_seconds: float
    compiles: int
    captures: int

    @property
    def per_point(self) -> str:
        compile_each = self.compile_seconds / max(self.compiles, 1)
        return f"compile {compile_each:.2f} s, capture {self.capture_seconds / max(self.captures, 1):.2f} s"


def _key(point: Point) -> str:
    return point_key(point.kernel_ref, point.params, point.dtype, point.platform, point.lnc)


def bound(state_dir: Path, groups: list[list[Point]], host: Host) -> Bound:
    """The sum over `groups` that run one after another of each group's bound; one group for a run
    whose points all share the host at once."""
    compiles: dict[str, float] = {}
    captures: dict[str, list[float]] = {}
    for record in read_latencies(state_dir):
        if record.tool == COMPILE:
            compiles[record.point] = record.slept_seconds
        elif record.tool == CAPTURE:
            captures.setdefault(record.point, []).append(record.slept_seconds)
    total = 0.0
    for group in groups:
        keys = [_key(p) for p in group]
        total += lower_bound(
            [compiles[k] for k in keys if k in compiles],
            [sum(captures[k]) for k in keys if k in captures],  # a point's repeats run under one lease
            host.compile_slots,
            host.cores,
        )
    all_captures = [s for slept in captures.values() for s in slept]
    return Bound(total, sum(compiles.values()), sum(all_captures), len(compiles), len(all_captures))


def shards(spec: SweepSpec) -> list[list[Point]]:
    """The sweep flow's even slices, run one after another."""
    points = expand(spec)
    count = math.ceil(len(points) / spec.execution.max_points_per_flow_run)
    size = math.ceil(len(points) / count)
    return [points[i * size : (i + 1) * size] for i in range(count)]


def run_child(mode: str, spec: SweepSpec, root: Path, env: dict[str, str], shard: dict | None = None) -> dict:
    """Start `sweep_child.py MODE` and wait for its figures."""
    return start_child(mode, spec, root, env, shard).result()


@dataclass
class Child:
    process: subprocess.Popen
    out: Path
    log: Path

    def result(self) -> dict:
        code = self.process.wait()
        if code != 0 or not self.out.is_file():
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"benchmark child exited {code}:\n{tail}")
        return json.loads(self.out.read_text())


def start_child(mode: str, spec: SweepSpec, root: Path, env: dict[str, str], shard: dict | None = None) -> Child:
    root.mkdir(parents=True, exist_ok=True)
    tag = f"{mode}-{shard['index']}" if shard else mode
    out, log = root / f"{tag}.json", root / f"{tag}.log"
    job = root / f"{tag}-job.json"
    job.write_text(json.dumps({"spec": spec.model_dump(mode="json"), "out": str(out), "shard": shard}))
    with log.open("w") as handle:
        process = subprocess.Popen(
            [sys.executable, str(HERE / "sweep_child.py"), mode, str(job)],
            env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=root,
        )  # fmt: skip
    return Child(process, out, log)
