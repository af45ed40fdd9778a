"""CPU per simulated tool call, one call at a time, so each child's CPU is that call's alone.

Each call runs through the production adapter (the same argv, environment and parsing a sweep uses);
the CPU is the waited-for children's (`RUSAGE_CHILDREN`), so it includes the interpreter's start and
exit. Two references from the same interpreter: a bare `python -P -c pass`, and the import of numpy and
ml_dtypes, which the simulated device needs to run a kernel (only the capture does).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernelsweep import stages
from kernelsweep.locks import CoreLeaser
from kernelsweep.sim import template
from kernelsweep.sim.config import sim_env
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.stores.artifacts import LocalArtifactStore
from kernelsweep.sweepspec.models import CaptureSettings
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext
from kernelsweep.toolchain import compiler, devices, profiler
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.versions import collect

TARGET_MS = 60.0


@dataclass(frozen=True)
class ToolCost:
    name: str
    ms: float  # CPU per call, children only


def children_cpu() -> float:
    """The waited-for children's CPU, and the simulated tools' template's with the tools it forked."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + template.cpu_seconds()


def per_call(calls: int, call: Callable[[int], object]) -> float:
    """Median children's CPU (ms) of `call(i)` for i in range(calls), after one unmeasured warm-up call
    (first-call effects, such as filling a bytecode cache, are not per-call costs). The median keeps a
    call that shared its core with another engineer's work from setting the figure."""
    call(calls)
    samples = []
    for i in range(calls):
        before = children_cpu()
        call(i)
        samples.append(children_cpu() - before)
    return statistics.median(samples) * 1000


def _python(toolchain: Toolchain, code: str) -> Callable[[int], object]:
    """`python -P -c CODE` in the stand-ins' environment (one BLAS thread, as theirs)."""
    env = {**os.environ, **toolchain.env}
    return lambda _: subprocess.run([sys.executable, "-P", "-c", code], check=True, env=env)


def _point(i: int) -> Point:
    """MLP points of distinct shapes, so no trace or compile is a cache hit."""
    return Point(
        sweep="toolcost",
        kernel="mlp",
        kernel_ref="kernelsweep.kernels.mlp:mlp",
        params={"b": 1, "s": 128, "h": 128 * (i % 16 + 1), "i": 128 * (i // 16 + 1)},
        dtype="bfloat16",
        platform="trn2",
        lnc=2,
        seed=1,
    )


def _context(root: Path, toolchain: Toolchain) -> StageContext:
    return StageContext(
        toolchain=toolchain,
        store=LocalArtifactStore(root / "artifacts"),
        capture=CaptureSettings.model_validate({"num_exec": 2}),
        leasers={2: CoreLeaser(root / "leases", [0, 1], lnc=2)},
        compile_slots=1,
        versions=collect(toolchain, root / "probe"),
    )


def tool_costs(calls: int = 9) -> list[ToolCost]:
    """Every simulated tool a sweep runs, at zero modelled latency (nothing is slept)."""
    with tempfile.TemporaryDirectory(prefix="kernelsweep-toolcost-") as tmp:
        root = Path(tmp)
        toolchain = sim_toolchain(root / "sim", env=sim_env(time_scale=0.0))
        ctx = _context(root, toolchain)
        n = calls + 1
        traced = [stages.trace_stage(ctx, _point(i)) for i in range(n)]  # warm-up for the figures below
        compiled = [stages.compile_stage(ctx, _point(i), traced[i]) for i in range(n)]
        inputs = [stages.inputs_stage(ctx, _point(i)) for i in range(n)]
        captured = [stages.capture_stage(ctx, _point(i), compiled[i], inputs[i]) for i in range(n)]
        fresh = sim_toolchain(root / "sim2", env=sim_env(time_scale=0.0))
        fresh_ctx = _context(root / "fresh", fresh)
        return [
            ToolCost("python -P -c pass (reference)", per_call(calls, _python(toolchain, "pass"))),
            ToolCost(
                "import numpy, ml_dtypes (reference)", per_call(calls, _python(toolchain, "import numpy, ml_dtypes"))
            ),
            ToolCost("neuron-ls -j", per_call(calls, lambda _: devices.list_devices(toolchain, default_lnc=2, lnc=2))),
            ToolCost("neuronx-cc --version", per_call(calls, lambda _: compiler.compiler_version(toolchain))),
            ToolCost("neuron-explorer --version", per_call(calls, lambda _: profiler.profiler_version(toolchain))),
            ToolCost(
                "trace worker (trace + compile)",
                per_call(calls, lambda i: stages.trace_stage(fresh_ctx, _point(i))),
            ),
            ToolCost(
                "neuron-explorer capture",
                per_call(calls, lambda i: stages.capture_stage(ctx, _point(i), compiled[i], inputs[i])),
            ),
            ToolCost(
                "neuron-explorer view",
                per_call(
                    calls,
                    lambda i: profiler.view(
                        toolchain,
                        ctx.store.fetch(compiled[i].neff, root / f"view-{i}" / "file.neff"),
                        ctx.store.fetch(captured[i].ntffs[0], root / f"view-{i}" / "profile.ntff"),
                        root / f"view-{i}",
                        60,
                        "summary-json",
                    ),
                ),
            ),
        ]


def main() -> None:
    costs = tool_costs()
    if "--ms-only" in sys.argv:
        print(" ".join(f"{cost.ms:.1f}" for cost in costs))
        return
    for cost in costs:
        print(f"{cost.ms:7.1f} ms  {cost.name}")


if __name__ == "__main__":
    main()
