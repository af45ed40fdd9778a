"""The `kernel_run` flow: one point, for running or re-running a single kernel shape (e.g. from the UI)."""

from __future__ import annotations

from prefect import flow

from flows.settings import locations_from_env
from flows.sweep import run_points
from kernelsweep.errors import UsageError
from kernelsweep.runtime import prepare
from kernelsweep.spec import SweepSpec, expand


@flow(name="kernel_run", flow_run_name="kernel-run-{spec.name}-{point_id}")
def kernel_run(spec: SweepSpec, point_id: str) -> dict:
    """Run one point of a sweep spec.

    Args:
        spec: The sweep the point belongs to.
        point_id: The point's id as `kernelsweep validate` prints it, e.g. mlp-b-1-s-128-h-1024-i-512-bfloat16-trn2.
    """
    points = [p for p in expand(spec) if p.point_id == point_id]
    if not points:
        raise UsageError(f"no point {point_id!r} in sweep {spec.name}; `kernelsweep validate SPEC` lists them")
    ctx, _ = prepare(spec, locations_from_env())
    return run_points(spec, ctx, points)
