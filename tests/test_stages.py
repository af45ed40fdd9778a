"""The five tool stages in-process on the simulated toolchain, without Prefect: caching, timing
semantics, repeats and the median, and what a stage raises when its inputs are wrong."""

from __future__ import annotations

import pytest
from stage_context import point, sim_context

from kernelsweep import names
from kernelsweep.errors import ExtractError, TraceError
from kernelsweep.kernels import load_kernel
from kernelsweep.metrics import read_profile
from kernelsweep.stages import (
    CaptureResult,
    capture_stage,
    compile_stage,
    extract_stage,
    inputs_stage,
    trace_stage,
)


def test_the_chain_runs_and_a_second_trace_and_compile_are_cache_hits(tmp_path):
    ctx, p = sim_context(tmp_path), point()
    traced = trace_stage(ctx, p)
    compiled = compile_stage(ctx, p, traced)
    assert not traced.cache_hit and not compiled.cache_hit
    assert traced.tracer == "sim-penguin" and compiled.seconds is not None and compiled.seconds > 0

    again = trace_stage(ctx, p)
    recompiled = compile_stage(ctx, p, again)
    assert again.cache_hit and again.ir == traced.ir and again.seconds == 0.0
    assert recompiled.cache_hit and recompiled.neff == compiled.neff
    assert recompiled.seconds is None  # no compiler ran: no compile time, rather than a misleading 0

    other = point(n=4096)
    assert trace_stage(ctx, other).ir != traced.ir  # another shape is another IR


def test_compile_targets_the_platform_with_its_own_lnc_flag(tmp_path):
    """trn1 takes no --lnc (it answers NCC_EARG001); trn2 compiles at the point's LNC."""
    ctx = sim_context(tmp_path)
    for platform in ("trn1", "trn2"):
        p = point(platform=platform)
        compiled = compile_stage(ctx, p, trace_stage(ctx, p))
        assert compiled.neff.size_bytes > 0


def test_capture_and_extract_report_the_median_of_the_repeats(tmp_path):
    ctx, p = sim_context(tmp_path, repeats=3), point()
    compiled = compile_stage(ctx, p, trace_stage(ctx, p))
    inputs = inputs_stage(ctx, p)
    assert set(inputs.inputs) == {"a", "b"}
    captured = capture_stage(ctx, p, compiled, inputs)
    assert len(captured.ntffs) == 3 and set(captured.outputs) == {"out"} and captured.seconds > 0
    assert len({ref.sha256 for ref in captured.ntffs}) == 3  # each capture draws its own run noise

    extracted = extract_stage(ctx, p, compiled, inputs, captured)
    latency = extracted.latency
    assert latency.repeats == 3 and latency.min_us < latency.median_us < latency.max_us
    assert extracted.metrics.values["total_time_us"] == latency.median_us  # the median repeat's own profile
    assert extracted.ntff in captured.ntffs
    stored = ctx.store.fetch(extracted.profile, tmp_path / "check" / "profile.json")
    assert read_profile(stored).values["total_time_us"] == latency.median_us
    assert extracted.correctness.passed


def test_an_output_the_capture_did_not_save_fails_extract_with_its_name(tmp_path):
    ctx, p = sim_context(tmp_path), point()
    compiled = compile_stage(ctx, p, trace_stage(ctx, p))
    inputs = inputs_stage(ctx, p)
    captured = capture_stage(ctx, p, compiled, inputs)
    renamed = CaptureResult(
        ntffs=captured.ntffs,
        outputs={"output_0": captured.outputs["out"]},  # what a NEFF without output names saves
        visible_cores=captured.visible_cores,
        seconds=captured.seconds,
    )
    with pytest.raises(ExtractError) as info:
        extract_stage(ctx, p, compiled, inputs, renamed)
    assert info.value.stage == "extract" and info.value.error_class == "MissingOutput"
    assert "no output named 'out' (saved: output_0)" in info.value.message


def test_a_kernel_limit_fails_at_trace_and_caches_nothing(tmp_path):
    ctx, p = sim_context(tmp_path), point(partition_size=256, free_size=16)
    with pytest.raises(TraceError) as info:
        trace_stage(ctx, p)
    assert info.value.error_class == "KernelConstraint" and not info.value.retryable
    assert not (tmp_path / "artifacts" / "index").exists()


def test_inputs_are_the_definitions_arrays_byte_for_byte(tmp_path):
    ctx, p = sim_context(tmp_path), point(dtype="bfloat16")
    inputs = inputs_stage(ctx, p)
    arrays = load_kernel(p.kernel_ref).build_inputs(p.params, p.dtype, p.seed)
    for name, ref in inputs.inputs.items():
        fetched = ctx.store.fetch(ref, tmp_path / "check" / names.input_file(name))
        assert fetched.read_bytes() == arrays[name].tobytes()
