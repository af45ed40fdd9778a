"""The five tool stages in-process on the simulated toolchain, without Prefect: caching, timing
semantics, repeats and the median, and what a stage raises when its inputs are wrong."""

from __future__ import annotations

import dataclasses

import pytest
from stage_context import point, sim_context

from kernelsweep import names
from kernelsweep.errors import CaptureError, ExtractError, TraceError
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
    assert (traced.tracer, traced.nki_version) == ("sim-nki-frontend", "0.7.0+kernelsweep.sim")
    assert compiled.neff == traced.neff  # compiled inside the tracing call, timed there
    assert compiled.seconds is not None and compiled.seconds > 0 and traced.seconds > 0

    again = trace_stage(ctx, p)
    recompiled = compile_stage(ctx, p, again)
    assert again.cache_hit and again.ir == traced.ir and again.seconds == 0.0
    assert recompiled.cache_hit and recompiled.neff == compiled.neff
    assert recompiled.seconds is None  # no compiler ran: no compile time, rather than a misleading 0

    other = point(n=4096)
    assert trace_stage(ctx, other).ir != traced.ir  # another shape is another IR


def test_an_nki_upgrade_misses_the_cache(tmp_path):
    """nki moves without the compiler (0.6.0 ships with neuronx-cc 2.27.x): its version is in the key."""
    ctx, p = sim_context(tmp_path), point()
    first = trace_stage(ctx, p)
    upgraded = dataclasses.replace(ctx, versions=dataclasses.replace(ctx.versions, nki="0.6.1+kernelsweep.sim"))
    assert not trace_stage(upgraded, p).cache_hit and trace_stage(ctx, p).cache_hit
    other_tracer = dataclasses.replace(ctx, versions=dataclasses.replace(ctx.versions, tracer="sim-penguin"))
    with pytest.raises(TraceError, match="the probed tracer sim-penguin is gone"):  # pinned, and unavailable
        trace_stage(other_tracer, p)
    assert first.ir == trace_stage(ctx, p).ir


def test_the_legacy_route_compiles_the_ir_folder_with_its_weights(tmp_path):
    """trn1 takes no --lnc (it answers NCC_EARG001); the compile stage unpacks penguin.py and weights/."""
    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_NKI": "legacy"})
    assert (ctx.versions.tracer, ctx.versions.nki) == ("sim-penguin", "neuronxcc.nki 2.21.33363.0+kernelsweep.sim")
    p = point("legacy", platform="trn1")
    traced = trace_stage(ctx, p)
    assert traced.neff is None and traced.tracer == "sim-penguin"
    compiled = compile_stage(ctx, p, traced)
    assert compiled.neff.size_bytes > 0 and compiled.seconds > 0 and not compiled.cache_hit
    assert compile_stage(ctx, p, trace_stage(ctx, p)).cache_hit


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


def test_captures_lease_at_the_points_lnc_and_refuse_one_without_cores(tmp_path):
    ctx = sim_context(tmp_path)
    for platform, cores in (("trn2", {"0", "1"}), ("trn1", {"0", "1", "2", "3"})):  # 4 physical cores
        p = point(platform=platform)
        compiled, inputs = compile_stage(ctx, p, trace_stage(ctx, p)), inputs_stage(ctx, p)
        assert capture_stage(ctx, p, compiled, inputs).visible_cores in cores
    only_lnc_1 = dataclasses.replace(ctx, leasers={1: ctx.leasers[1]})
    with pytest.raises(CaptureError, match="no free NeuronCores to lease at LNC=2") as info:
        capture_stage(only_lnc_1, point(), compiled, inputs)
    assert info.value.error_class == "NoNeuronCores"


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
    ctx, p = sim_context(tmp_path), point(n=4096, partition_size=256, free_size=16)
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
