"""Issue 33, R5: a profile whose schema kernelsweep has no field map for (the stand-in `renamed` tools:
schema 99.0.0, every Summary field renamed) fails its point, naming the schema version, instead of
storing a row of nulls that looks measured."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from stage_context import point, sim_context

from kernelsweep.errors import ExtractError
from kernelsweep.results.rows import PointRecord, build_row
from kernelsweep.stages import capture_stage, compile_stage, extract_stage, inputs_stage, trace_stage


@pytest.mark.parametrize("profile_format", ["summary-json", "parquet"])
def test_a_profile_in_an_unknown_schema_is_a_failed_row_naming_the_version(tmp_path, profile_format):
    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_TOOLS": "renamed"}, profile_format=profile_format)
    p = point()
    compiled, inputs = compile_stage(ctx, p, trace_stage(ctx, p)), inputs_stage(ctx, p)
    captured = capture_stage(ctx, p, compiled, inputs)
    with pytest.raises(ExtractError) as failed:
        extract_stage(ctx, p, compiled, inputs, captured)
    error = failed.value
    assert (error.error_class, error.retryable) == ("UnreadableProfileSchema", False)
    assert "read as profile schema 99.0.0" in error.message and "maps schema majors 7, 12" in error.message
    record = PointRecord(point=p, started_at=datetime.now(UTC), error=error, error_stage="extract")
    row = build_row(record, flow_run_id="r", toolchain="sim", is_simulation=True, versions=ctx.versions)
    assert (row.status, row.error_class, row.latency_median_us) == ("failed", "UnreadableProfileSchema", None)
    assert "profile schema 99.0.0" in row.error_message
