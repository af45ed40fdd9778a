"""What each of the five tool stages does for one point, as plain functions over small references.

kernelsweep.tasks wraps each function in a Prefect task (retries, names, run ids); nothing here
knows about Prefect, so every stage runs and is tested on its own (tests/test_stages.py). Stages
hand each other `ArtifactRef`s, never arrays: each stage fetches the bytes it needs from the store
into its own scratch folder. The sixth stage, store, is the results writer.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

import numpy as np

from kernelsweep import hotspots, names, reference
from kernelsweep.correctness import Correctness, check_outputs
from kernelsweep.dtypes import numpy_dtype
from kernelsweep.errors import ExtractError, InvalidShapeError, TraceError
from kernelsweep.kernels import KernelDefinition, KernelSourceNotFound, load_kernel, nki_kernel_source
from kernelsweep.locks import CoreLease
from kernelsweep.model_run import model_from, model_refs
from kernelsweep.platforms import get_platform
from kernelsweep.profiles.metrics import LatencyStats, ProfileMetrics, read_profile
from kernelsweep.stage_results import (
    CaptureResult,
    CompileResult,
    ExtractResult,
    InputsResult,
    TraceResult,
)
from kernelsweep.stores import cache
from kernelsweep.stores.artifacts import ArtifactRef
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext
from kernelsweep.this_host.scratch import scratch
from kernelsweep.toolchain import compiler, explorer, profiler, tracing
from kernelsweep.toolchain.compile_cost import CompileCost
from kernelsweep.toolchain.iterations import IterationTiming, time_iterations
from kernelsweep.toolchain.neff import NeffFormatError, read_neff

COMPILE_TIMEOUT_SECONDS = 1800.0
# The cache entry's record of which host compiled its NEFF (a compile-farm host, or a capture host that
# missed the store): what the row's `neff_compile_host` says. Not part of any key: a NEFF is the same
# NEFF whichever host built it with the same versions.
HOST_META = "host"
# What shaped a traced NEFF (schema 5): compiled with NKI_DEBUG_INFO, and whether NKI's allocator fell back
DEBUG_INFO_META, ALLOC_FALLBACK_META = "debug_info", "alloc_fallback"
VIEW_TIMEOUT_SECONDS = 600.0

log = logging.getLogger(__name__)


def trace_stage(ctx: StageContext, point: Point) -> TraceResult:
    """Trace (and on current NKI, compile) in a worker process, holding a compile slot while it
    traces: the tracing call is as heavy as a compile. The worker starts (Python, the SDK's imports)
    while the thread waits for the slot. `seconds` is the worker's wall time from its go minus the
    compile inside it: neither the wait for the slot nor the start-up that overlapped it. The run's
    tracer choice picks the tracer and learns which proved unusable here; under `--toolchain cpu`
    the model the simulator captures is made too."""
    definition = load_kernel(point.kernel_ref)
    source = ctx.store.put_file(Path(inspect.getsourcefile(type(definition)) or ""))
    nki_source = _nki_source(ctx, definition)
    choice = ctx.tracer_choice
    key = _trace_key(ctx, point, source.sha256, nki_source.sha256 if nki_source else None, choice.first)
    hit = cache.lookup(ctx.store, "trace", ctx.versions.compiler, key)
    target = get_platform(point.platform).compiler_target
    if hit is not None and ("neff" not in hit.refs or _built_as_keyed(ctx, hit.refs["neff"], target)):
        return replace(_cached_trace(hit, source, choice), nki_source=nki_source)
    try:
        request = tracing.TraceRequest.for_point(point, definition, target)
    except InvalidShapeError as exc:  # a point that skipped the spec's checks
        raise TraceError(f"{definition.name} {point.shape}: {exc.message}", error_class="InvalidShape") from None
    cpu = ctx.toolchain.kind == "cpu"
    with scratch("trace") as workdir:
        out = tracing.trace(
            ctx.toolchain,
            request,
            workdir,
            choice=choice,
            timeout_seconds=COMPILE_TIMEOUT_SECONDS,
            simulate=cpu,
            debug_info=hotspots.wanted(ctx.capture),
            memory_limit_bytes=ctx.compile_memory_limit_bytes,
            slots=ctx.compile_limiter,
            lease=_executing_lease(ctx, point),
        )
        seconds = out.worker_seconds - (out.compile_seconds or 0.0)
        refs = {"ir": ctx.store.put_file(out.ir_path, take=True)}
        refs |= {"neff": ctx.store.put_file(out.neff_path, take=True)} if out.neff_path else {}
        if cpu:
            refs |= model_refs(ctx, point, definition, out, workdir)
    if out.tracer != choice.first or out.fallbacks:  # recorded under the tracer that made it
        key = _trace_key(ctx, point, source.sha256, nki_source.sha256 if nki_source else None, out.tracer)
    meta = {
        "tracer": out.tracer,
        "nki_version": out.nki_version or "",
        "compile_options": out.compile_options or "",
        "nki_compiler_frontend": out.nki_compiler_frontend or "",
        "simulate_note": out.simulate_note or "",
        HOST_META: (ctx.host_name or "") if out.neff_path else "",
        DEBUG_INFO_META: _flag(hotspots.wanted(ctx.capture) if out.neff_path else None),
        ALLOC_FALLBACK_META: _flag(out.alloc_fallback),
    }
    cache.record(ctx.store, "trace", ctx.versions.compiler, key, refs, meta)
    made = _cached_trace(cache.Entry(refs, meta), source, choice)
    cost = CompileCost(**out.compile_cost) if out.compile_cost else None
    if cost is not None and ctx.compile_peaks is not None:
        ctx.compile_peaks.record(ctx.versions.compiler, cost.peak_rss_bytes)
    return replace(
        made,
        seconds=seconds,
        cache_hit=False,
        compile_seconds=out.compile_seconds,
        nki_source=nki_source,
        compile_cost=cost,
    )


def _executing_lease(ctx: StageContext, point: Point) -> Callable[[], AbstractContextManager[CoreLease]] | None:
    """The point's core lease for a tracer that executes the kernel (NKI 0.7's nki.jit route), on a
    host with cores to lease; None elsewhere (a compile host), where that route is not tried."""
    if point.lnc not in ctx.leasers:
        return None
    return lambda: ctx.leaser_for(point.lnc).lease(waiting_for=point.point_id)


def _trace_key(ctx: StageContext, point: Point, source_sha256: str, nki_sha256: str | None, tracer: str | None) -> str:
    return cache.trace_key(
        kernel_source_sha256=source_sha256,
        nki_source_sha256=nki_sha256,
        kernel_ref=point.kernel_ref,
        params=point.params,
        dtype=point.dtype,
        platform=point.platform,
        lnc=point.lnc,
        tracer=tracer,
        nki_version=ctx.versions.nki,
        compiler_version=ctx.versions.compiler,
        nki_compiler_frontend=ctx.versions.nki_compiler_frontend,
        toolchain=ctx.toolchain.kind,
        tunables=point.tunables,
        debug_info=hotspots.wanted(ctx.capture),
    )


def _cached_trace(entry: cache.Entry, source: ArtifactRef, choice: tracing.TracerChoice) -> TraceResult:
    """A trace as its cache entry holds it (a hit from an earlier run, or the entry just written)."""
    refs, meta = entry.refs, entry.meta
    model = model_from(refs, meta.get("simulate_note") or None)
    return TraceResult(
        kernel_source=source,
        ir=refs["ir"],
        tracer=meta["tracer"],
        seconds=0.0,
        cache_hit=True,
        neff=refs.get("neff"),
        nki_version=meta.get("nki_version") or None,
        compile_options=meta.get("compile_options") or None,
        nki_compiler_frontend=meta.get("nki_compiler_frontend") or None,
        model=model,
        fell_through=choice.fell_through(meta["tracer"]),
        compile_host=meta.get(HOST_META) or None,
        debug_info=_unflag(meta.get(DEBUG_INFO_META)),
        alloc_fallback=_unflag(meta.get(ALLOC_FALLBACK_META)),
    )


def _built_as_keyed(ctx: StageContext, neff: ArtifactRef, target: str) -> bool:
    """Whether a cached NEFF's own header names the compiler version and target its key says: a host
    whose SDK reports one version and compiles with another would otherwise have every capture that
    reuses its NEFFs measure another compiler's code under this one's name. A mismatch is a miss
    (compiled again, its entry written anew) with one warning; a NEFF that names neither is trusted."""
    with scratch("neff-check") as workdir:
        try:
            info = read_neff(ctx.store.fetch(neff, workdir / "file.neff", rebuildable=True, read_only=True)).info
        except NeffFormatError as exc:
            log.warning("cached NEFF %s is not a NEFF (%s): a cache miss, compiling it again", neff.sha256[:12], exc)
            return False
    built = (str(info.get("tool_version") or ""), str(info.get("target") or ""))
    wanted = (ctx.versions.compiler or "", target)
    if all(not have or _release(have) == _release(want) for have, want in zip(built, wanted, strict=True)):
        return True
    log.warning(
        "cached NEFF %s was built by compiler %s for %s, but its cache key says compiler %s for %s: a cache miss, "
        "compiling it again (a host whose SDK reports another compiler than it runs wrote it)",
        neff.sha256[:12], built[0] or "?", built[1] or "?", *wanted,
    )  # fmt: skip
    return False


def _release(version: str) -> str:
    """A version without its local part (`2.21.1+abc` -> `2.21.1`), as the header and a probe may differ there."""
    return version.split("+", 1)[0]


def _flag(value: bool | None) -> str:
    """A cache entry's meta holds strings: "" for unknown."""
    return "" if value is None else str(value).lower()


def _unflag(text: str | None) -> bool | None:
    return None if not text else text == "true"


def _nki_source(ctx: StageContext, definition: KernelDefinition) -> ArtifactRef | None:
    """The NKI kernel's file is the code that is traced: a change to it must miss the cache, and
    hotspots' line numbers point into it (the row links it)."""
    try:
        path, _ = nki_kernel_source(definition.nki_kernel)
    except KernelSourceNotFound:
        return None  # the trace itself reports the missing kernel
    return ctx.store.put_file(path)


def compile_stage(ctx: StageContext, point: Point, traced: TraceResult) -> CompileResult:
    """`seconds` is the compiler's own wall time (None on a cache hit), not the wait for a compile slot.
    Current NKI compiles inside the tracing call: its NEFF and compile time come with the trace."""
    if traced.neff is not None:  # the tracer compiled already; its NEFF is cached with the trace
        return CompileResult(
            neff=traced.neff,
            seconds=traced.compile_seconds,
            cache_hit=traced.cache_hit,
            compile_options=traced.compile_options,
            model=traced.model,
            compile_cost=traced.compile_cost,
            compile_host=traced.compile_host,
            debug_info=traced.debug_info,
            alloc_fallback=traced.alloc_fallback,
        )
    platform = get_platform(point.platform)
    target, lnc = platform.compiler_target, platform.compile_lnc(point.lnc)
    key = cache.compile_key(
        ir_sha256=traced.ir.sha256,
        compiler_version=ctx.versions.compiler,
        target=target,
        lnc=lnc,
        flags=[],
        tracer=traced.tracer,
        nki_version=traced.nki_version,
        nki_compiler_frontend=traced.nki_compiler_frontend,
    )
    options = compiler.compile_options(target, lnc)
    hit = cache.lookup(ctx.store, "compile", ctx.versions.compiler, key)
    if hit is not None and _built_as_keyed(ctx, hit.refs["neff"], target):
        return CompileResult(
            neff=hit.refs["neff"],
            seconds=None,
            cache_hit=True,
            compile_options=options,
            model=traced.model,
            compile_host=hit.meta.get(HOST_META) or None,
            debug_info=False,  # `neuronx-cc compile` runs without NKI_DEBUG_INFO
        )
    with scratch("compile") as workdir:
        ir = ctx.store.fetch(traced.ir, workdir / names.IR, rebuildable=True, read_only=True)
        folder = tracing.unpack(ir, workdir / "ir")
        with ctx.compile_limiter:  # compiles are CPU- and memory-heavy: bounded, unlike the other stages
            started = time.perf_counter()
            neff = compiler.compile_ir(
                ctx.toolchain, folder / names.PENGUIN, folder, target, lnc, COMPILE_TIMEOUT_SECONDS
            )
            seconds = time.perf_counter() - started
        ref = ctx.store.put_file(neff, take=True)
    cache.record(ctx.store, "compile", ctx.versions.compiler, key, {"neff": ref}, {HOST_META: ctx.host_name or ""})
    return CompileResult(
        neff=ref, seconds=seconds, compile_options=options, model=traced.model, compile_host=ctx.host_name,
        debug_info=False,
    )  # fmt: skip


def inputs_stage(ctx: StageContext, point: Point) -> InputsResult:
    """Inputs as raw C-order bytes, one `inp-<name>-000.bin` per NEFF input (seed 000), built once per
    content (kernelsweep.reference): the same shape, dtype and seed on another platform or in a re-run
    reuses them."""
    with scratch("inputs") as workdir:
        return InputsResult(inputs=reference.point_inputs(ctx.store, point, load_kernel(point.kernel_ref), workdir))


def capture_stage(ctx: StageContext, point: Point, compiled: CompileResult, inputs: InputsResult) -> CaptureResult:
    """`repeats` captures of one NEFF under one NeuronCore lease, which covers exactly the captures.

    `seconds` is the captures' own wall time, not the wait for the lease. Outputs come from the first;
    under `--toolchain cpu` the simulator captures its model of the point, and the outputs are those
    nki.simulate computed from the real kernel (the model's would only echo the reference). Once a
    capture has dropped DGE notifications after a timeout, the later repeats go without.

    A search trial with a drop bar is captured `drop.after` times first, under a lease of their own;
    their profiles are viewed with the core free, and a trial clearly slower than the search's best so
    far (kernelsweep.search.dropping) stops there, its row with fewer repeats. Else the rest follow
    under a second lease. (The extract stage views those first profiles again: the price of keeping
    the stages' split; one view per capture is small beside the captures a drop saves.)
    """
    settings = ctx.capture
    repeats = point.repeats or settings.repeats
    first = point.drop.after if point.drop is not None and point.drop.after < repeats else repeats
    dge = dge_notifs(ctx, point.platform)
    with scratch("capture") as workdir:
        neff = ctx.store.fetch(_captured_neff(compiled), workdir / names.NEFF, rebuildable=True, read_only=True)
        files = {
            name: ctx.store.fetch(ref, workdir / names.input_file(name), rebuildable=True, read_only=True)
            for name, ref in inputs.inputs.items()
        }
        results, visible, seconds, timed = _captures(ctx, point, neff, files, workdir, range(first), dge, repeats)
        why = _losing(ctx, point, neff, results, workdir) if first < repeats else None
        if why is not None:  # a dropped trial is not timed by iterations either
            log.info("%s: %s", point.point_id, why)
        elif first < repeats:
            dge = results[-1].dge_notifs
            more, visible, more_seconds, timed = _captures(
                ctx, point, neff, files, workdir, range(first, repeats), dge, repeats
            )
            results, seconds = results + more, seconds + more_seconds
        ntffs = [ctx.store.put_file(result.ntff, take=True) for result in results]
        saved = profiler.outputs_by_kernel_name(results[0].outputs, _neff_outputs(neff), _output_names(point))
        outputs = {name: ctx.store.put_file(path, take=True) for name, path in saved.items()}
    if compiled.model is not None:
        outputs = dict(compiled.model.outputs)
    return CaptureResult(
        ntffs=ntffs,
        outputs=outputs,
        visible_cores=visible,
        seconds=seconds,
        dge_notifs=tuple(r.dge_notifs for r in results),
        notes=tuple(r.note for r in results if r.note),
        iterations=timed,
        dropped=why,
    )


def _captures(
    ctx: StageContext,
    point: Point,
    neff: Path,
    files: dict[str, Path],
    workdir: Path,
    repeats: range,
    dge: bool,
    total: int,
) -> tuple[list[profiler.CaptureOutput], str, float, IterationTiming | None]:
    """These repeats' captures under one lease, and when they are the last of `total`, the iterations'
    timing under the same lease: (their outputs, the cores leased, their wall seconds, the timing)."""
    results: list[profiler.CaptureOutput] = []
    timed = None
    with ctx.leaser_for(point.lnc).lease(waiting_for=point.point_id) as lease:
        started = time.perf_counter()
        for repeat in repeats:
            run_dir = workdir / f"repeat-{repeat}"
            run_dir.mkdir()
            results.append(capture_one(ctx, neff, files, run_dir, lease.visible_cores, point.lnc, dge))
            dge = results[-1].dge_notifs
        if ctx.capture.iterations and repeats.stop == total:
            timed = _iterations(ctx, point, neff, files, workdir, lease.visible_cores)
        return results, lease.visible_cores, time.perf_counter() - started, timed


def _losing(
    ctx: StageContext, point: Point, neff: Path, results: list[profiler.CaptureOutput], workdir: Path
) -> str | None:
    """Why the trial's first captures end it (clearly slower than the search's best so far), or None."""
    from kernelsweep.search import dropping  # the verdict rule's scipy only where a search drops trials

    assert point.drop is not None
    profile_format = explorer.view_format(ctx.capture.profile_format, ctx.toolchain.profiler, ctx.versions.profiler)
    latencies = []
    for repeat, result in enumerate(results):
        run_dir = workdir / f"drop-check-{repeat}"
        run_dir.mkdir()
        latencies.append(viewed_latency(ctx, neff, result.ntff, run_dir, profile_format, repeat)[0])
    return dropping.losing(point.drop, latencies)


def dge_notifs(ctx: StageContext, platform: str) -> bool:
    """Whether captures start with DGE notifications: the spec's setting, else the platform's default."""
    return {"on": True, "off": False}.get(ctx.capture.dge_notifs, get_platform(platform).dge_notifs_default)


def capture_one(
    ctx: StageContext, neff: Path, files: dict[str, Path], run_dir: Path, visible_cores: str, lnc: int, dge: bool
) -> profiler.CaptureOutput:
    """One profiled capture of a NEFF on leased cores, with the run's capture settings (a sweep's
    repeats, and `compare --confirm`'s interleaved ones)."""
    settings = ctx.capture
    return profiler.capture(
        ctx.toolchain,
        neff,
        files,
        run_dir,
        num_exec=settings.num_exec,
        profile_nth_exec=settings.profile_nth_exec,
        visible_cores=visible_cores,
        lnc=lnc,
        timeout_seconds=settings.timeout_seconds,
        check_output_determinism=settings.check_output_determinism,
        dge_notifs=dge,
    )


def _iterations(
    ctx: StageContext, point: Point, neff: Path, files: dict[str, Path], workdir: Path, visible_cores: str
) -> IterationTiming:
    """`capture.iterations` executions in one process of the runtime's benchmark tool, on the leased core."""
    infos = load_kernel(point.kernel_ref).input_infos(point.params, point.dtype)
    inputs = {t.name: (files[t.name], t.shape, t.dtype) for t in infos}
    return time_iterations(
        ctx.toolchain,
        neff,
        inputs,
        workdir / "iterations",
        iterations=ctx.capture.iterations,
        visible_cores=visible_cores,
        lnc=point.lnc,
        timeout_seconds=ctx.capture.timeout_seconds,
    )


def _captured_neff(compiled: CompileResult) -> ArtifactRef:
    """The NEFF the profiler runs: the compiled one, or under `--toolchain cpu` the simulator's model."""
    return compiled.model.neff if compiled.model is not None else compiled.neff


def _neff_outputs(neff: Path) -> list[str]:
    try:
        return read_neff(neff).outputs
    except NeffFormatError:
        return []  # then only matching names map


def _output_names(point: Point) -> list[str]:
    return [t.name for t in load_kernel(point.kernel_ref).output_infos(point.params, point.dtype)]


def extract_stage(
    ctx: StageContext, point: Point, compiled: CompileResult, inputs: InputsResult, captured: CaptureResult
) -> ExtractResult:
    """Every repeat's profile is viewed; the row's metrics are those of the median-latency repeat.
    Fields are read through the schema the installed Explorer prints, where the profile has none."""
    profile_format = explorer.view_format(ctx.capture.profile_format, ctx.toolchain.profiler, ctx.versions.profiler)
    with scratch("extract") as workdir:
        neff = ctx.store.fetch(_captured_neff(compiled), workdir / names.NEFF, rebuildable=True, read_only=True)
        profiles, viewed = [], []
        for repeat, ntff_ref in enumerate(captured.ntffs):
            run_dir = workdir / f"repeat-{repeat}"
            ntff = ctx.store.fetch(ntff_ref, run_dir / names.NTFF, read_only=True)
            latency_us, metrics, view, path = viewed_latency(ctx, neff, ntff, run_dir, profile_format, repeat)
            warning = view.dma_warning or profiler.dma_warning("\n".join(metrics.warnings))
            profiles.append((latency_us, metrics, ctx.store.put_file(path), warning))
            viewed.append((ntff, view.path if profile_format == "parquet" else None))
        checked, checked_by = _correctness(ctx, point, compiled, inputs, captured, workdir)
        latencies = [profile[0] for profile in profiles]
        median = sorted(range(len(latencies)), key=latencies.__getitem__)[(len(latencies) - 1) // 2]
        spots = (
            hotspots.of_view(ctx.toolchain, neff, *viewed[median], workdir / "hotspots", VIEW_TIMEOUT_SECONDS)
            if hotspots.wanted(ctx.capture)
            else None
        )
    _, metrics, profile, warning = profiles[median]
    return ExtractResult(
        ntff=captured.ntffs[median],
        profile=profile,
        metrics=metrics,
        correctness=checked,
        latency=LatencyStats.of(latencies),
        timing_source="simulator" if ctx.toolchain.is_simulation else "device",
        correctness_source=checked_by,
        dge_notifs=captured.dge_notifs[median] if captured.dge_notifs else None,
        dma_warning=warning,
        hotspots=spots,
        dropped=captured.dropped,
    )


def viewed_latency(
    ctx: StageContext, neff: Path, ntff: Path, run_dir: Path, profile_format: str, repeat: int
) -> tuple[float, ProfileMetrics, profiler.View, Path]:
    """One capture's NTFF viewed: its latency (total_time), its metrics, the view and the profile file."""
    view = profiler.view(ctx.toolchain, neff, ntff, run_dir, VIEW_TIMEOUT_SECONDS, profile_format)
    path = (profiler.summary_table(view.path) or view.path) if view.path.is_dir() else view.path
    metrics = read_profile(path, schema=explorer.summary_schema(ctx.toolchain))
    latency_us = metrics.values.get("total_time_us")
    if latency_us is None:
        raise ExtractError(f"profile of repeat {repeat} has no total_time", error_class="MissingMetric")
    return float(latency_us), metrics, view, path


def _correctness(
    ctx: StageContext,
    point: Point,
    compiled: CompileResult,
    inputs: InputsResult,
    captured: CaptureResult,
    workdir: Path,
) -> tuple[Correctness | None, str]:
    """The check and what produced the outputs it read: the device, the simulator (its outputs are
    the reference's: the check proves the plumbing only), or nki.simulate running the real kernel."""
    if compiled.model is not None:
        if not captured.outputs:
            return None, f"unchecked: {compiled.model.note or 'nki.simulate gave no outputs'}"
        return _check(ctx, point, inputs, captured, workdir), "nki.simulate"
    return _check(ctx, point, inputs, captured, workdir), "simulator" if ctx.toolchain.is_simulation else "device"


def _check(
    ctx: StageContext, point: Point, inputs: InputsResult, captured: CaptureResult, workdir: Path
) -> Correctness:
    """Compare what the device wrote with the float64 reference of the very input bytes it was fed
    (computed once per content: kernelsweep.reference)."""
    definition = load_kernel(point.kernel_ref)
    expected = reference.expected_outputs(ctx.store, point, definition, inputs.inputs, workdir)
    actual = {}
    for info in definition.output_infos(point.params, point.dtype):
        if info.name not in captured.outputs:
            saved = ", ".join(sorted(captured.outputs)) or "none"
            raise ExtractError(
                f"capture saved no output named {info.name!r} (saved: {saved})", error_class="MissingOutput"
            )
        path = ctx.store.fetch(captured.outputs[info.name], workdir / names.output_file(info.name), read_only=True)
        actual[info.name] = np.fromfile(path, dtype=numpy_dtype(info.dtype)).reshape(info.shape)
    return check_outputs(actual, expected, point.dtype)
