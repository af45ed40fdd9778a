"""The five-stage chain for one point inside a flow run (called from the flow's threads): the core's
chain (`kernelsweep.chain`, which holds its rules for failures and stopping), each stage a task call so
Prefect records and retries it, and its task-run id noted for the row's lineage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.utilities.annotations import opaque, quote

from kernelsweep.chain import run_stages
from kernelsweep.results import PointRecord, StoredCapture
from kernelsweep.sweepspec import Point
from kernelsweep.tasks import capture_task, compile_task, extract_task, inputs_task, trace_task
from kernelsweep.this_host import StageContext

_TASKS: dict[str, Any] = {  # Prefect's Task objects
    "trace": trace_task,
    "compile": compile_task,
    "inputs": inputs_task,
    "capture": capture_task,
    "extract": extract_task,
}


def run_point(
    ctx: StageContext,
    point: Point,
    stored: StoredCapture | None = None,
    on_captured: Callable[[PointRecord], None] | None = None,
) -> PointRecord | None:
    return run_stages(ctx, point, as_task, stored=stored, on_captured=on_captured)


def as_task(record: PointRecord, stage: str, args: tuple[Any, ...]) -> Any:
    """Run the stage as its task; its result, or the exception the task ended with.

    Prefect walks every argument of a task call, twice, looking for upstream results (the task-run
    graph's edges) and futures. The context and the point are never a task's result, and the context
    holds the whole host (toolchain, store, leases): both go in `quote`d. A stage result is an edge
    as a whole, never through what it holds (artifact refs, metrics): each goes in `opaque`, so Prefect
    looks it up as an upstream result without walking its fields."""
    ctx, point, *results = args
    state = _TASKS[stage](quote(ctx), quote(point), *map(opaque, results), return_state=True)
    if state.state_details.task_run_id:
        record.task_run_ids[stage] = str(state.state_details.task_run_id)
    return state.result()
