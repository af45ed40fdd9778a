"""The five-stage chain for one point, run inside a flow run (called from the flow's threads).

Each stage is a task call, so Prefect records and retries it; a failure ends the chain and the
point becomes a failed row carrying everything made before it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kernelsweep.context import StageContext
from kernelsweep.errors import KernelsweepError
from kernelsweep.results.rows import PointRecord
from kernelsweep.spec import Point
from kernelsweep.tasks import capture_task, compile_task, extract_task, inputs_task, trace_task


def run_point(ctx: StageContext, point: Point) -> PointRecord:
    record = PointRecord(point=point, started_at=datetime.now(UTC))
    try:
        record.trace = _call(record, "trace", trace_task, ctx, point)
        record.compiled = _call(record, "compile", compile_task, ctx, point, record.trace)
        record.inputs = _call(record, "inputs", inputs_task, ctx, point)
        record.captured = _call(record, "capture", capture_task, ctx, point, record.compiled, record.inputs)
        record.extracted = _call(
            record, "extract", extract_task, ctx, point, record.compiled, record.inputs, record.captured
        )
    except Exception as exc:  # every failure becomes a row; nothing escapes the chain
        record.error = exc
        record.error_stage = exc.stage if isinstance(exc, KernelsweepError) and exc.stage else record.error_stage
    record.finished_at = datetime.now(UTC)
    return record


def _call(record: PointRecord, stage: str, task: Callable[..., Any], *args: Any) -> Any:
    """Run the task and note its task-run id for the row's lineage.

    `error_stage` names the running stage until it succeeds, so a failure that carries no stage of
    its own (an unexpected exception) is still attributed to the right one.
    """
    record.error_stage = stage
    state = task(*args, return_state=True)
    if state.state_details.task_run_id:
        record.task_run_ids[stage] = str(state.state_details.task_run_id)
    result = state.result()
    record.error_stage = None
    return result
