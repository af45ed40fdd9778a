from prefect import task

from kernelsweep.stages import CaptureResult, CompileResult, InputsResult, capture_stage
from kernelsweep.sweepspec import Point
from kernelsweep.tasks.policy import STAGE_TASK_OPTIONS, transient_retries
from kernelsweep.this_host import StageContext


@task(name="capture", task_run_name="capture-{point.point_id}", **STAGE_TASK_OPTIONS, **transient_retries())
def capture_task(ctx: StageContext, point: Point, compiled: CompileResult, inputs: InputsResult) -> CaptureResult:
    """Profile on an exclusively leased NeuronCore; a busy core is retried with backoff."""
    return capture_stage(ctx, point, compiled, inputs)
