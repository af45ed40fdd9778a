"""Issue 33, R8/R9: rows say what shaped the NEFF: whether it was compiled with NKI_DEBUG_INFO, and
whether NKI's allocator fell back to neuronx-cc's (the simulated compiler says so on fd 2, where the
real one writes its words, when KERNELSWEEP_SIM_FAULTS names the kernel). A cache hit says the same."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from stage_context import point, sim_context

from kernelsweep.results.rows import PointRecord, build_row
from kernelsweep.stages import compile_stage, trace_stage


def row_of(ctx, p, traced):
    record = PointRecord(point=p, started_at=datetime.now(UTC), trace=traced, compiled=compile_stage(ctx, p, traced))
    return build_row(record, flow_run_id="r", toolchain="sim", is_simulation=True, versions=ctx.versions)


@pytest.mark.parametrize(("hotspots", "fault"), [("on", "alloc-fallback=vector_add"), ("off", "")])
def test_rows_say_whether_the_neff_has_debug_info_and_the_allocator_fell_back(tmp_path, hotspots, fault):
    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_FAULTS": fault}, hotspots=hotspots)
    p = point()
    first = row_of(ctx, p, trace_stage(ctx, p))
    assert (first.neff_debug_info, first.alloc_fallback) == (hotspots == "on", bool(fault))
    again = trace_stage(ctx, p)
    cached = row_of(ctx, p, again)
    assert again.cache_hit and (cached.neff_debug_info, cached.alloc_fallback) == (hotspots == "on", bool(fault))


def test_the_legacy_routes_separate_compile_has_no_debug_info_and_an_unknown_fallback(tmp_path):
    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_NKI": "legacy"}, hotspots="on")
    p = point("legacy", platform="trn1")
    row = row_of(ctx, p, trace_stage(ctx, p))
    assert (row.neff_debug_info, row.alloc_fallback) == (False, None)
