"""The `kernel_run` flow: one point, for running or re-running a single kernel shape (e.g. from the UI)."""

from __future__ import annotations

from prefect import flow

from kernelsweep.errors import UsageError
from kernelsweep.flows.host_run import run_on_this_host
from kernelsweep.results import SweepOutcome
from kernelsweep.sweepspec import SweepSpec, expand


@flow(name="kernel_run", flow_run_name="kernel-run-{spec.name}-{point_id}")
def kernel_run(spec: SweepSpec, point_id: str) -> SweepOutcome:
    """Run one point of a sweep spec.

    Args:
        spec: The sweep the point belongs to.
        point_id: The point's id as `kernelsweep validate` prints it, e.g. mlp-b-1-s-128-h-1024-i-512-bfloat16-trn2.
    """
    points = [p for p in expand(spec) if p.point_id == point_id]
    if not points:
        raise UsageError(f"no point {point_id!r} in sweep {spec.name}; `kernelsweep validate SPEC` lists them")
    return run_on_this_host(spec, points)
