"""One point's five stages, written once: trace -> compile -> inputs -> capture -> extract.

Who runs a stage differs, the chain does not. A flow runs each stage as its Prefect task
(`kernelsweep.flows.chain` passes a runner that calls the task and notes its run id), the compile farm
the same tasks up to the compile, and `kernelsweep bench` and the tests' datasets the stage functions
themselves (`run_directly`). The rules are the chain's:

- a failure ends the chain and is the record's error, in the stage the error names or else the one
  that was running: every failure becomes a row, never an exception out of the chain;
- once the context is told to stop (`ctx.stop`), a point that has not started does not start and a
  running one starts no new stage, except that a point which has captured is always extracted: what
  was measured is finished and saved, what was not is left for the resumed run. Such a point has no
  record (None): it is not done, and a failure met while stopping (a tool killed on the way out) says
  nothing about the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kernelsweep.errors import KernelsweepError
from kernelsweep.results.captures import StoredCapture
from kernelsweep.results.rows import PointRecord
from kernelsweep.stages import capture_stage, compile_stage, extract_stage, inputs_stage, trace_stage
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext

STAGES = ("trace", "compile", "inputs", "capture", "extract")
_FUNCTIONS: dict[str, Callable[..., Any]] = dict(
    zip(STAGES, (trace_stage, compile_stage, inputs_stage, capture_stage, extract_stage), strict=True)
)
# (the point's record, the stage's name, its arguments) -> the stage's result; it raises what the stage raised
StageRunner = Callable[[PointRecord, str, tuple[Any, ...]], Any]


def run_directly(record: PointRecord, stage: str, args: tuple[Any, ...]) -> Any:
    """The stage function itself, in this thread."""
    return _FUNCTIONS[stage](*args)


class _Stopped(Exception):
    pass


def run_stages(
    ctx: StageContext,
    point: Point,
    runner: StageRunner = run_directly,
    *,
    compile_only: bool = False,
    stored: StoredCapture | None = None,
    on_captured: Callable[[PointRecord], None] | None = None,
) -> PointRecord | None:
    """The point's stages (its trace and compile alone with `compile_only`), each through `runner`;
    None when the run was told to stop before the point was done.

    `stored` is the point's capture an earlier attempt journaled (kernelsweep.results.captures): it is
    extracted instead of captured again while the store holds its files. `on_captured` is told of each
    new capture before its extraction starts."""
    if ctx.stop.is_set():
        return None
    record = PointRecord(point=point, started_at=datetime.now(UTC))

    def step(stage: str, *args: Any) -> Any:
        if stage != "extract" and ctx.stop.is_set():
            raise _Stopped
        record.error_stage = stage  # until it succeeds: an error naming no stage is this one's
        result = runner(record, stage, args)
        record.error_stage = None
        return result

    try:
        record.trace = step("trace", ctx, point)
        record.compiled = step("compile", ctx, point, record.trace)
        if not compile_only:
            record.inputs = step("inputs", ctx, point)
            if stored is not None and _still_stored(ctx, stored):
                record.captured = stored.result
                if stored.task_run_id:
                    record.task_run_ids["capture"] = stored.task_run_id
            else:
                record.captured = step("capture", ctx, point, record.compiled, record.inputs)
                if on_captured is not None:
                    on_captured(record)
            record.extracted = step("extract", ctx, point, record.compiled, record.inputs, record.captured)
    except _Stopped:
        return None
    except Exception as exc:  # every failure becomes a row; nothing escapes the chain
        if ctx.stop.is_set():
            return None
        record.error = exc
        record.error_stage = exc.stage if isinstance(exc, KernelsweepError) and exc.stage else record.error_stage
    record.finished_at = datetime.now(UTC)
    return record


def _still_stored(ctx: StageContext, stored: StoredCapture) -> bool:
    """Whether the store still holds every file the capture's extraction reads."""
    return all(ctx.store.has(ref) for ref in [*stored.result.ntffs, *stored.result.outputs.values()])
