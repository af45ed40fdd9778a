from prefect import task

from kernelsweep.stages import InputsResult, inputs_stage
from kernelsweep.sweepspec import Point
from kernelsweep.tasks.policy import STAGE_TASK_OPTIONS
from kernelsweep.this_host import StageContext


@task(name="inputs", task_run_name="inputs-{point.point_id}", **STAGE_TASK_OPTIONS)
def inputs_task(ctx: StageContext, point: Point) -> InputsResult:
    """Serialise the point's inputs to .bin files in the artifact store."""
    return inputs_stage(ctx, point)
