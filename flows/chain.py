"""The five-stage chain for one point, run inside a flow run (called from the flow's threads).

Each stage is a task call, so Prefect records and retries it; a failure ends the chain and the
point becomes a failed row carrying everything made before it.

When the run is told to stop (`ctx.stop`), a point that has not started does not start and a
running one starts no new stage, except that a point which has captured is always extracted: what
was measured is finished and saved, what was not is left for the resumed run. Such a point returns
None (no row): it is not done, and a failure met while stopping (a tool killed on the way out)
says nothing about the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kernelsweep.errors import KernelsweepError
from kernelsweep.results.rows import PointRecord
from kernelsweep.sweepspec.point import Point
from kernelsweep.tasks import capture_task, compile_task, extract_task, inputs_task, trace_task
from kernelsweep.this_host.context import StageContext


class _Stopped(Exception):
    pass


def run_point(ctx: StageContext, point: Point) -> PointRecord | None:
    if ctx.stop.is_set():
        return None
    record = PointRecord(point=point, started_at=datetime.now(UTC))
    try:
        record.trace = _call(ctx, record, "trace", trace_task, ctx, point)
        record.compiled = _call(ctx, record, "compile", compile_task, ctx, point, record.trace)
        record.inputs = _call(ctx, record, "inputs", inputs_task, ctx, point)
        record.captured = _call(ctx, record, "capture", capture_task, ctx, point, record.compiled, record.inputs)
        record.extracted = _call(
            None, record, "extract", extract_task, ctx, point, record.compiled, record.inputs, record.captured
        )
    except _Stopped:
        return None
    except Exception as exc:  # every failure becomes a row; nothing escapes the chain
        if ctx.stop.is_set():
            return None
        record.error = exc
        record.error_stage = exc.stage if isinstance(exc, KernelsweepError) and exc.stage else record.error_stage
    record.finished_at = datetime.now(UTC)
    return record


def _call(ctx: StageContext | None, record: PointRecord, stage: str, task: Callable[..., Any], *args: Any) -> Any:
    """Run the task (unless `ctx` says stop) and note its task-run id for the row's lineage.

    `error_stage` names the running stage until it succeeds, so a failure that carries no stage of
    its own (an unexpected exception) is still attributed to the right one.
    """
    if ctx is not None and ctx.stop.is_set():
        raise _Stopped
    record.error_stage = stage
    state = task(*args, return_state=True)
    if state.state_details.task_run_id:
        record.task_run_ids[stage] = str(state.state_details.task_run_id)
    result = state.result()
    record.error_stage = None
    return result
