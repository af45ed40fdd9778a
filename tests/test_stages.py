"""The five tool stages in-process on the simulated toolchain, without Prefect: caching, timing
semantics, repeats and the median, and what a stage raises when its inputs are wrong."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from stage_context import point, sim_context

from kernelsweep import names
from kernelsweep.errors import CaptureError, ExtractError, TraceError
from kernelsweep.kernels import load_kernel
from kernelsweep.profiles.metrics import read_profile
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
    # the profiler reports whole nanoseconds, so two of three repeats may tie (about 1 in 500 at 1% jitter)
    assert latency.repeats == 3 and latency.median_us == sorted(latency.latencies_us)[1]
    assert latency.min_us == min(latency.latencies_us) < latency.max_us == max(latency.latencies_us)
    assert extracted.metrics.values["total_time_us"] == latency.median_us  # the median repeat's own profile
    assert extracted.ntff in captured.ntffs
    stored = ctx.store.fetch(extracted.profile, tmp_path / "check" / "profile.json")
    assert read_profile(stored).values["total_time_us"] == latency.median_us
    assert extracted.correctness.passed


def test_the_tools_read_links_into_the_store_and_every_artifact_stays_as_stored(tmp_path, monkeypatch):
    """Capture and view read the NEFF, the inputs and the NTFF through links into the store, not
    copies made per stage, and what the stages make is moved into the store, not copied; so a tool
    that wrote to its input would change an artifact, and after a whole chain every stored file must
    still hash to its name."""
    from kernelsweep import stages
    from kernelsweep.stores import artifacts
    from kernelsweep.stores.artifacts import sha256_file

    links: list[bool] = []  # for each file a tool was given: a link, when it was given
    real_capture, real_view = stages.capture_one, stages.profiler.view

    def capture_one(ctx, neff: Path, files: dict[str, Path], *args):
        links.extend(path.is_symlink() for path in (neff, *files.values()))
        return real_capture(ctx, neff, files, *args)

    def view(toolchain, neff: Path, ntff: Path, *args):
        links.extend(path.is_symlink() for path in (neff, ntff))
        return real_view(toolchain, neff, ntff, *args)

    monkeypatch.setattr(stages, "capture_one", capture_one)
    monkeypatch.setattr(stages.profiler, "view", view)
    copied: list[str] = []  # the files the store copied rather than linked or moved in
    real_copy = artifacts.shutil.copyfile

    def copyfile(src: Path, dst: Path) -> Path:
        copied.append(Path(src).name)
        return real_copy(src, dst)

    monkeypatch.setattr(artifacts.shutil, "copyfile", copyfile)
    ctx, p = sim_context(tmp_path, repeats=2), point()
    compiled = compile_stage(ctx, p, trace_stage(ctx, p))
    inputs = inputs_stage(ctx, p)
    captured = capture_stage(ctx, p, compiled, inputs)
    assert extract_stage(ctx, p, compiled, inputs, captured).correctness.passed
    assert links == [True] * (2 * 3 + 2 * 2)  # two captures of NEFF + 2 inputs, two views of NEFF + NTFF
    # the tools' outputs, the inputs and the reference are moved in; only files the stages do not own
    # (the kernel's sources) and the viewed profiles (a Parquet view's folder is read again) are copied
    summary = stages.profiler.PROFILE_OUTPUTS["summary-json"]
    assert [name for name in copied if not name.endswith(".py")] == [summary, summary]
    stored = [path for path in (ctx.store.root / "sha256").rglob("*") if path.is_file()]
    assert len(stored) > 8 and all(sha256_file(path) == path.name for path in stored)


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


def test_trn2_captures_collect_dge_notifications_and_fall_back_once_after_a_timeout(tmp_path):
    """On trn2 captures pass --enable-dge-notifs (Explorer: DMA figures "may not be accurate" without);
    a capture that times out with it runs again without, and the row says so and flags its DMA figures."""
    from kernelsweep.results.row_parts import costed_of, measured_of

    p = point()
    ctx = sim_context(tmp_path)
    compiled, inputs = compile_stage(ctx, p, trace_stage(ctx, p)), inputs_stage(ctx, p)
    captured = capture_stage(ctx, p, compiled, inputs)
    extracted = extract_stage(ctx, p, compiled, inputs, captured)
    assert captured.dge_notifs == (True,) and captured.notes == ()
    assert (extracted.dge_notifs, extracted.dma_warning, extracted.metrics.entries) == (True, None, 2)

    faulty = dataclasses.replace(ctx.toolchain, env={**ctx.toolchain.env, "KERNELSWEEP_SIM_FAULTS": "dge-timeout=1"})
    ctx = dataclasses.replace(ctx, toolchain=faulty, capture=ctx.capture.model_copy(update={"repeats": 2}))
    captured = capture_stage(ctx, p, compiled, inputs)
    assert captured.dge_notifs == (False, False)  # the second repeat does not try again
    assert captured.notes == (
        "with --enable-dge-notifs: neuron-explorer capture failed: NRT_TIMEOUT: execution timed out (DGE "
        "notifications on); captured again without (DMA figures may be understated)",
    )
    extracted = extract_stage(ctx, p, compiled, inputs, captured)
    assert extracted.dge_notifs is False and "DMA results may not be accurate" in extracted.dma_warning
    measured = measured_of(p, costed_of(p), extracted)
    assert (measured.dge_notifs, measured.dma_unreliable, measured.profile_entries) == (False, True, 2)
    assert measured.hw_mfu_percent is not None and 0 < measured.hw_mfu_percent < 100

    off = dataclasses.replace(ctx, capture=ctx.capture.model_copy(update={"dge_notifs": "off", "repeats": 1}))
    assert capture_stage(off, p, compiled, inputs).dge_notifs == (False,)


def test_trn1_captures_without_dge_notifications(tmp_path):
    ctx, p = sim_context(tmp_path), point(platform="trn1")
    compiled, inputs = compile_stage(ctx, p, trace_stage(ctx, p)), inputs_stage(ctx, p)
    assert capture_stage(ctx, p, compiled, inputs).dge_notifs == (False,)


@pytest.mark.slow
def test_full_json_asked_of_explorer_2_34_is_read_from_parquet(tmp_path):
    """2.33 was the last Explorer with full-profile JSON: a spec asking for it gets Parquet's figures,
    read in the schema 2.34's stand-in states (nanosecond times, a hypothesis of sim.tools)."""
    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_TOOLS": "2.34"}, profile_format="json")
    p = point()
    compiled, inputs = compile_stage(ctx, p, trace_stage(ctx, p)), inputs_stage(ctx, p)
    metrics = extract_stage(ctx, p, compiled, inputs, capture_stage(ctx, p, compiled, inputs)).metrics
    assert metrics.source_format == "parquet" and metrics.entries == 2
    assert metrics.schema.version == "12.0.1" and metrics.schema.units["total_time"] == "nanoseconds"
    assert 1 < metrics.values["total_time_us"] < 1000


@pytest.mark.parametrize("route", ["traced", "legacy"])
def test_a_cached_neff_another_compiler_built_is_a_miss_with_a_warning(tmp_path, caplog, route):
    """Issue 41: a NEFF under this compiler's key whose own header names another compiler (a host whose SDK
    reports one version and runs another) was reused, and the row said this compiler built it."""
    import json
    import logging
    from dataclasses import asdict

    from kernelsweep.toolchain.neff import read_neff, write_neff

    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_NKI": "legacy"} if route == "legacy" else None)
    p = point("legacy", platform="trn1") if route == "legacy" else point()
    good = compile_stage(ctx, p, trace_stage(ctx, p)).neff
    found = read_neff(ctx.store.fetch(good, tmp_path / "good.neff"))
    wrong = tmp_path / "wrong.neff"
    write_neff(wrong, name=found.name, info={**found.info, "tool_version": "2.99.1.0"}, neff=found.neff,
               variables={n: {"type": "input"} for n in found.inputs} | {n: {"type": "output"} for n in found.outputs},
               build_version="2.99.1.0")  # fmt: skip
    bad = ctx.store.put_file(wrong)
    [entry] = [e for e in (tmp_path / "artifacts" / "index").rglob("*.json") if good.sha256 in e.read_text()]
    doc = json.loads(entry.read_text())
    doc["refs"]["neff"] = asdict(bad)
    entry.write_text(json.dumps(doc))

    with caplog.at_level(logging.WARNING, logger="kernelsweep"):
        again = compile_stage(ctx, p, trace_stage(ctx, p))
    assert not again.cache_hit and again.neff == good  # compiled again by this compiler, same bytes
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "2.99.1.0" in said[0] and ctx.versions.compiler in said[0] and "cache miss" in said[0]
    assert compile_stage(ctx, p, trace_stage(ctx, p)).cache_hit  # the entry names this compiler's NEFF again
