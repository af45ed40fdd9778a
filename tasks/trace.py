from prefect import task

from kernelsweep.stages import TraceResult, trace_stage
from kernelsweep.sweepspec import Point
from kernelsweep.tasks.policy import STAGE_TASK_OPTIONS
from kernelsweep.this_host import StageContext


@task(name="trace", task_run_name="trace-{point.point_id}", **STAGE_TASK_OPTIONS)
def trace_task(ctx: StageContext, point: Point) -> TraceResult:
    """Trace the kernel at this point to IR (deterministic: never retried)."""
    return trace_stage(ctx, point)
