"""`--toolchain cpu`: what stands in for the device when the real SDK traces and compiles.

The simulator's NEFF of the point is what its profiler captures and times (a real NEFF holds no
model to time; the real one stays the row's `neff`), and the outputs the installed NKI's
nki.simulate computed from the real kernel are what the correctness check reads. Both are stored
with the trace, in its cache entry.
"""

from __future__ import annotations

from pathlib import Path

from kernelsweep.errors import KernelsweepError, TraceError
from kernelsweep.kernels import KernelDefinition
from kernelsweep.stage_results import ModelRun
from kernelsweep.stores.artifacts import ArtifactRef
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext
from kernelsweep.toolchain.tracing import TraceOutput

SIMULATED = "simulated:"  # cache refs of nki.simulate's outputs, by output name


def model_refs(
    ctx: StageContext, point: Point, definition: KernelDefinition, out: TraceOutput, workdir: Path
) -> dict[str, ArtifactRef]:
    """`--toolchain cpu`: the simulator's NEFF of the point (built as this SDK's compiler, whose version
    the row reports), and nki.simulate's outputs, for the store."""
    from kernelsweep.sim.tracer import model_neff  # deferred: only cpu runs model a NEFF

    folder = workdir / "model"
    folder.mkdir()
    try:
        neff = model_neff(point, definition, folder, ctx.versions.compiler)
    except KernelsweepError as exc:
        raise TraceError(
            f"the real trace and compile succeeded, but the simulator cannot model {definition.name} "
            f"{point.shape} for the capture: {exc.message}",
            error_class="ModelUnavailable",
        ) from None
    refs = {"model_neff": ctx.store.put_file(neff)}
    return refs | {SIMULATED + name: ctx.store.put_file(path) for name, path in out.simulated_outputs.items()}


def model_from(refs: dict[str, ArtifactRef], note: str | None) -> ModelRun | None:
    """The model a trace's cache entry holds, if it is a `--toolchain cpu` trace."""
    if "model_neff" not in refs:
        return None
    outputs = {name.removeprefix(SIMULATED): ref for name, ref in refs.items() if name.startswith(SIMULATED)}
    return ModelRun(refs["model_neff"], outputs, note)
