from prefect import task

from kernelsweep.stages import CompileResult, TraceResult, compile_stage
from kernelsweep.sweepspec import Point
from kernelsweep.tasks.policy import STAGE_TASK_OPTIONS, transient_retries
from kernelsweep.this_host import StageContext


@task(name="compile", task_run_name="compile-{point.point_id}", **STAGE_TASK_OPTIONS, **transient_retries())
def compile_task(ctx: StageContext, point: Point, traced: TraceResult) -> CompileResult:
    """neuronx-cc: compiler diagnostics fail at once; only timeouts are retried."""
    return compile_stage(ctx, point, traced)
