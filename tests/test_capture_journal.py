"""A point captured before its run was killed is extracted from the journaled capture by the retry,
never captured again (issue 35): the flows' point pool (`kernelsweep.flows.points.measure`) with the
simulator's real tools, a journal on disk, and the tools it launches recorded."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

from specs import VECTOR_ADD, sim_spec
from stage_context import sim_context

from kernelsweep.flows.points import measure
from kernelsweep.results import StoredCapture
from kernelsweep.results.journal import begin, plan_resume, run_key
from kernelsweep.stages import capture_stage, compile_stage, inputs_stage, trace_stage
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.toolchain.process import recording


def _captures(runs) -> int:
    return sum(1 for r in runs if "capture" in r.argv)


def test_a_journaled_capture_is_extracted_by_the_next_attempt_and_the_device_is_not_taken_again(
    tmp_path, prefect_harness
):
    spec = sim_spec(tmp_path, [{**VECTOR_ADD, "grid": {"n": [2048, 4096], "free_size": [1]}}], name="captured")
    done, pending = expand(spec)
    ctx = sim_context(tmp_path)
    key = run_key(spec)
    journal = begin(spec.results, plan_resume(spec.results, key, [done, pending]), str(uuid.uuid4()),
                    date(2026, 11, 27), spec.name, datetime.now(UTC))  # fmt: skip
    compiled = compile_stage(ctx, done, trace_stage(ctx, done))  # the killed attempt: captured, not extracted
    captured = capture_stage(ctx, done, compiled, inputs_stage(ctx, done))
    journal.record_capture(StoredCapture(done.point_id, captured, "the-first-attempt"), done)

    with recording() as runs:
        rows, unsaved = measure({done.toolchain_name: ctx}, [done, pending], journal.run_id, journal)
    assert unsaved is None and sorted(r.status for r in rows) == ["ok", "ok"]
    assert _captures(runs) == 1  # the pending point's alone
    [reused] = [r for r in rows if r.shape == done.shape]
    assert reused.ntff_sha256 == captured.ntffs[0].sha256  # extracted from the journaled NTFFs
    assert reused.task_run_ids["capture"] == "the-first-attempt"  # lineage: the run that captured it
    assert set(journal.captures([done, pending])) == {done.point_id, pending.point_id}  # the new one journaled too
