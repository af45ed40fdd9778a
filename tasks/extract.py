from prefect import task

from kernelsweep.stages import CaptureResult, CompileResult, ExtractResult, InputsResult, extract_stage
from kernelsweep.sweepspec import Point
from kernelsweep.tasks.policy import STAGE_TASK_OPTIONS, transient_retries
from kernelsweep.this_host import StageContext


@task(name="extract", task_run_name="extract-{point.point_id}", **STAGE_TASK_OPTIONS, **transient_retries())
def extract_task(
    ctx: StageContext, point: Point, compiled: CompileResult, inputs: InputsResult, captured: CaptureResult
) -> ExtractResult:
    """View the profile as JSON, normalise its metrics and check outputs against the reference."""
    return extract_stage(ctx, point, compiled, inputs, captured)
