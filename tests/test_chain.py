"""The five-stage chain's rules, written once (kernelsweep.chain) for the flows, the compile farm, bench and
the tests' datasets: which stage a failure is charged to, what a stop request leaves, and the farm's
trace-and-compile. The stages here are a runner that hands each stage a token or fails it on cue."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from stage_context import point

from kernelsweep.chain import STAGES, run_stages
from kernelsweep.errors import CaptureError
from kernelsweep.results.captures import StoredCapture
from kernelsweep.results.rows import PointRecord
from kernelsweep.stage_results import CaptureResult
from kernelsweep.stores.artifacts import ArtifactRef

POINT = point("vector_add")


class Stages:
    """Each stage returns a token naming it; `fail` raises in one, `stop_in` sets the stop flag in one."""

    def __init__(self, fail: dict[str, BaseException] | None = None, stop_in: str | None = None) -> None:
        self.ctx = SimpleNamespace(stop=threading.Event())
        self.fail, self.stop_in, self.ran = fail or {}, stop_in, []

    def __call__(self, record: PointRecord, stage: str, args: tuple[Any, ...]) -> Any:
        self.ran.append(stage)
        if stage == self.stop_in:
            self.ctx.stop.set()
        if stage in self.fail:
            raise self.fail[stage]
        return f"{stage}-result"

    def run(self, **options: Any) -> PointRecord | None:
        return run_stages(self.ctx, POINT, self, **options)  # type: ignore[arg-type]


def test_every_stage_runs_in_order_and_hands_its_result_on():
    stages = Stages()
    record = stages.run()
    assert stages.ran == list(STAGES)
    assert record is not None and record.error is None and record.error_stage is None
    assert (record.trace, record.compiled, record.extracted) == ("trace-result", "compile-result", "extract-result")
    assert record.finished_at is not None and record.finished_at >= record.started_at


@pytest.mark.parametrize("stage", STAGES)
def test_an_error_naming_no_stage_is_charged_to_the_running_one_and_ends_the_chain(stage):
    stages = Stages(fail={stage: ValueError("odd")})
    record = stages.run()
    assert record is not None and record.error_stage == stage and isinstance(record.error, ValueError)
    assert stages.ran == list(STAGES[: STAGES.index(stage) + 1])


def test_an_error_naming_its_stage_is_charged_to_that_stage():
    record = Stages(fail={"extract": CaptureError("late")}).run()
    assert record is not None and record.error_stage == "capture"


def test_a_stopped_run_starts_no_point_and_no_new_stage():
    stopped = Stages()
    stopped.ctx.stop.set()
    assert stopped.run() is None and stopped.ran == []
    traced = Stages(stop_in="trace")
    assert traced.run() is None and traced.ran == ["trace"]


def test_a_point_that_has_captured_is_still_extracted_when_the_run_stops():
    stages = Stages(stop_in="capture")
    record = stages.run()
    assert stages.ran == list(STAGES) and record is not None and record.extracted == "extract-result"


def test_a_failure_met_while_stopping_is_no_row():
    assert Stages(stop_in="compile", fail={"compile": ValueError("killed on the way out")}).run() is None


def test_the_compile_farm_traces_and_compiles_only():
    stages = Stages()
    record = stages.run(compile_only=True)
    assert stages.ran == ["trace", "compile"] and record is not None and record.compiled == "compile-result"
    failed = Stages(fail={"compile": ValueError("NCC")}).run(compile_only=True)
    assert failed is not None and failed.error_stage == "compile"


def _stored(held: bool) -> tuple[Stages, StoredCapture]:
    ref = ArtifactRef("file:///store/ntff", "ab" * 32, 10)
    stored = StoredCapture(POINT.point_id, CaptureResult(ntffs=[ref], outputs={}, visible_cores="0", seconds=1.0), "t1")
    stages = Stages()
    stages.ctx.store = SimpleNamespace(has=lambda r: held and r == ref)
    return stages, stored


def test_a_journaled_capture_is_extracted_not_captured_again_and_keeps_its_task_run():
    stages, stored = _stored(held=True)
    told: list[PointRecord] = []
    record = stages.run(stored=stored, on_captured=told.append)
    assert stages.ran == ["trace", "compile", "inputs", "extract"] and told == []  # the device is not taken again
    assert record is not None and record.captured is stored.result and record.task_run_ids["capture"] == "t1"


def test_a_journaled_capture_whose_files_are_gone_is_captured_again_and_told_before_extraction():
    stages, stored = _stored(held=False)
    told: list[tuple[Any, list[str]]] = []
    record = stages.run(stored=stored, on_captured=lambda r: told.append((r.captured, list(stages.ran))))
    assert stages.ran == list(STAGES) and record is not None and record.captured == "capture-result"
    assert told == [("capture-result", ["trace", "compile", "inputs", "capture"])]  # before extract ran
