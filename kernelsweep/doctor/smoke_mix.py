"""The smoke check's real instruction mix and the questions only a host answers: the bf16 matmul's
figures checked for plausibility, a capture with DGE notifications against one without, a bf16 MLP
end to end, the SDK's compile-API signatures and the profiler's schema.

The points are the real-host audit's (N6): a matmul of M=256, K=256, N=1024 (two n tiles of 512,
one per core at LNC=2: `nc_matmul` accumulating into PSUM, a PSUM -> SBUF copy with a bf16 cast) and
an MLP of b=1, s=128, h=256, i=256 (`nc_transpose` into PSUM, `activation` on PSUM, a `shared_hbm`
reshape), both bf16.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelsweep.doctor.smoke_steps import FAIL, INFO, OK, WARN, Skipped, Smoke, Step, needs, outputs_check
from kernelsweep.kernels import load_kernel
from kernelsweep.platforms import get_platform
from kernelsweep.profiles.metrics import ProfileMetrics, read_profile
from kernelsweep.profiles.schema import REFERENCE_VERSION
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import explorer, profiler, tracing
from kernelsweep.toolchain.neff import read_neff
from kernelsweep.toolchain.process import run_tool

STEP_TIMEOUT_SECONDS = 900.0
ABOUT_MODEL = 0.10  # how near the model's FLOPs summed entries must come (real-host audit 3, R6)
DMA_FIELDS = ("dma_active_time_us", "dma_transfer_count", "dma_transfer_total_bytes", "mbu_estimated_percent")


def mix_point(kernel: str, platform: str) -> Point:
    params = {"matmul": {"M": 256, "K": 256, "N": 1024}, "mlp": {"b": 1, "s": 128, "h": 256, "i": 256}}[kernel]
    return Point(
        sweep="smoke",
        kernel=kernel,
        kernel_ref=f"kernelsweep.kernels.{kernel}:{kernel}",
        params=params,
        dtype="bfloat16",
        platform=platform,
        lnc=get_platform(platform).default_lnc,
        seed=0,
    )


def plausible(point: Point, metrics: ProfileMetrics) -> tuple[str, str, list[str]]:
    """(status, verdict, details): 0 < time, MFU <= 100 (ours and nki-library's), hardware FLOPs >= the
    model's, and how many summary entries there were at this LNC."""
    platform = get_platform(point.platform)
    model = load_kernel(point.kernel_ref).model_flops(point.params)
    time_us, hardware = metrics.values.get("total_time_us"), metrics.values.get("hardware_flops")
    details = [f"{metrics.entries} summary entr{'y' if metrics.entries == 1 else 'ies'} at LNC={point.lnc}"]
    problems = []
    if not time_us or time_us <= 0:
        return FAIL, f"total_time is {time_us}: no time to judge", details
    mfu = 100 * model / (time_us * 1e-6) / platform.peak_flops(point.dtype, point.lnc)
    details.append(f"total_time {time_us:.2f} us; MFU {mfu:.1f}% of {point.dtype} peak at LNC={point.lnc}")
    if mfu > 100:
        problems.append(f"MFU {mfu:.0f}% > 100")
    if hardware is None:
        problems.append("the profile has no hardware_flops")
    else:
        hw_mfu = platform.hardware_mfu_percent(hardware, metrics.values.get("transpose_flops") or 0, time_us * 1e-6,
                                               point.lnc)  # fmt: skip
        details.append(f"hardware_flops / model FLOPs = {hardware / model:.3f}; nki-library-style MFU {hw_mfu:.1f}%")
        if hardware < model:
            problems.append(f"hardware_flops {hardware} < model FLOPs {model} (one core's entry only?)")
        if hw_mfu > 100:
            problems.append(f"hardware MFU {hw_mfu:.0f}% > 100")
    if problems:
        return FAIL, "implausible: " + "; ".join(problems), details
    return OK, f"plausible: {time_us:.2f} us, MFU {mfu:.1f}%, hardware FLOPs >= model FLOPs", details


def plausibility(state: Smoke, step: Step) -> None:
    step.status, step.verdict, details = plausible(state.point, needs(state.metrics, "the summary-json profile"))
    step.details += details


def lnc_reading(state: Smoke, step: Step) -> None:
    """Which reading of the summary entries held (real-host audit 3, R6): one entry holding the whole
    logical core (its hardware FLOPs >= the model's as they are), or one entry per physical core
    (their sum within ABOUT_MODEL of the model's, where the whole-core reading would double it)."""
    metrics = needs(state.metrics, "the summary-json profile")
    hardware = metrics.values.get("hardware_flops")
    if hardware is None:
        raise Skipped("the profile has no hardware_flops to judge the entries by")
    ratio = hardware / load_kernel(state.point.kernel_ref).model_flops(state.point.params)
    entries = metrics.entries
    step.details.append(f"{entries} entr{'y' if entries == 1 else 'ies'}; hardware_flops (summed) / model FLOPs "
                        f"= {ratio:.3f}")  # fmt: skip
    if entries == 1:
        held = ratio >= 1
        step.verdict = "one entry holds the whole logical core" if held else "one entry holds one core's share only"
    elif abs(ratio - 1) <= ABOUT_MODEL:
        held = True
        step.verdict = f"{entries} entries, one per physical core: summing their counters (as rows do) held"
    else:
        held = False
        whole = abs(ratio - entries) <= ABOUT_MODEL * entries
        step.verdict = f"{entries} entries summed to {ratio:.2f}x the model's FLOPs: " + (
            "each entry holds the whole logical core, so rows double its counters" if whole else "neither reading held"
        )
    step.status = OK if held else FAIL


Viewed = tuple[ProfileMetrics, profiler.View, profiler.CaptureOutput]


def _capture_and_view(state: Smoke, point: Point, neff: Path, folder: str, *, dge: bool) -> Viewed:
    run_dir = state.fresh(folder)
    captured = profiler.capture(
        state.toolchain, neff, state.input_files(run_dir, point), run_dir, num_exec=2, profile_nth_exec=2,
        visible_cores=state.core, lnc=point.lnc, timeout_seconds=STEP_TIMEOUT_SECONDS, dge_notifs=dge,
    )  # fmt: skip
    view = profiler.view(state.toolchain, neff, captured.ntff, run_dir, STEP_TIMEOUT_SECONDS, "summary-json")
    return read_profile(view.path), view, captured


def _shown(value: float | None) -> str:
    return "none" if value is None else str(value) if isinstance(value, int) else f"{value:.4g}"


def dge_comparison(state: Smoke, step: Step) -> None:
    """One capture without DGE notifications and one with, their DMA figures side by side."""
    neff = needs(state.neff, "a NEFF")
    without, plain_view, _ = _capture_and_view(state, state.point, neff, "dge-off", dge=False)
    with_, dge_view, captured = _capture_and_view(state, state.point, neff, "dge-on", dge=True)
    for name in DMA_FIELDS:
        step.details.append(
            f"{name}: without {_shown(without.values.get(name))}, with {_shown(with_.values.get(name))}"
        )
    step.details.append(f"view warning without: {plain_view.dma_warning or 'none'}")
    if captured.note:
        step.status, step.verdict = WARN, f"{captured.note}: sweeps here will fall back the same way"
    elif dge_view.dma_warning:
        step.status, step.verdict = WARN, f"still warned with {profiler.DGE_NOTIFS_FLAG}: {dge_view.dma_warning}"
    else:
        default = "on" if get_platform(state.point.platform).dge_notifs_default else "off"
        step.verdict = f"{profiler.DGE_NOTIFS_FLAG} captured without a DMA warning (sweep default here: {default})"


def mlp(state: Smoke, step: Step) -> None:
    """The bf16 MLP through trace, capture, outputs and plausibility, in one step."""
    if state.tracer is None:
        raise Skipped("needs a usable tracer")
    point = mix_point("mlp", state.point.platform)
    request = tracing.TraceRequest.for_point(point, load_kernel(point.kernel_ref), state.target)
    out = tracing.trace(state.toolchain, request, state.fresh("mlp-trace"), tracer=state.tracer,
                        timeout_seconds=STEP_TIMEOUT_SECONDS, lease=state.lease)  # fmt: skip
    neff = needs(out.neff_path, "a NEFF from the tracer (the legacy route compiles separately)")
    step.details.append(
        f"traced by {out.tracer} in {out.trace_seconds:.1f} s (compile {out.compile_seconds or 0:.1f} s)"
    )
    metrics, _, captured = _capture_and_view(state, point, neff, "mlp-capture", dge=False)
    status, verdict = outputs_check(point, read_neff(neff).outputs, captured.outputs, state.workdir / "mlp-capture")
    step.details.append(f"outputs: {verdict}")
    sane, judged, details = plausible(point, metrics)
    step.details += details
    step.status = FAIL if FAIL in (status, sane) else OK
    step.verdict = f"{point.kernel} {point.shape} {point.dtype}: outputs {verdict.split(':')[0]}; {judged}"


# Not the matmul's defaults (tile_n=512, loop_order="mn"): what a search or a tunables axis hands over
TUNED = {"tile_n": 256, "loop_order": "nm"}


def tuned(state: Smoke, step: Step) -> None:
    """The matmul at non-default tunables: they are bound into the kernel, so the compiler is handed
    its two tensors alone (neuronxcc cannot take 0-d inputs: kernelsweep.toolchain.tracing.binding)."""
    if state.tracer is None:
        raise Skipped("needs a usable tracer")
    point = state.point.model_copy(update={"tunables": TUNED})
    request = tracing.TraceRequest.for_point(point, load_kernel(point.kernel_ref), state.target)
    out = tracing.trace(state.toolchain, request, state.fresh("tuned-trace"), tracer=state.tracer,
                        timeout_seconds=STEP_TIMEOUT_SECONDS, lease=state.lease)  # fmt: skip
    neff = out.neff_path or state.compile_legacy(out.ir_path)
    bound = ", ".join(f"{k}={v}" for k, v in TUNED.items())
    step.details.append(f"inputs handed to the compiler: {[t.name for t in request.inputs]}; bound: {bound}")
    step.verdict = f"{out.tracer} traced and compiled the matmul at {bound} ({neff.name}, {neff.stat().st_size} bytes)"


def driver_signatures(state: Smoke, step: Step) -> None:
    """What the SDK's compile API looks like here (kernelsweep.doctor.signatures, in its own process)."""
    if state.toolchain.is_simulation:
        raise Skipped("the simulated toolchain has no nki package")
    argv = [sys.executable, "-P", "-m", "kernelsweep.doctor.signatures", json.dumps([p for p in sys.path if p])]
    result = run_tool(argv, env=state.toolchain.env, timeout_seconds=120)
    found = [line for line in result.stdout.splitlines() if "(" in line and "not importable" not in line]
    step.show_all = True  # every signature, on the terminal too: the point of asking
    step.status = INFO if found else WARN
    step.verdict = f"{len(found)} compile-API signatures printed" if found else "no NKI compile API importable"


def profile_schema(state: Smoke, step: Step) -> None:
    """The profiler's own schema: its version, and the named fields it lacks."""
    if state.toolchain.profiler != "neuron-explorer":
        raise Skipped("neuron-profile prints no profile schema; fields are read as schema 7.4.0's")
    schema = explorer.ask_schema(state.toolchain)
    if schema is None:
        step.status = WARN
        step.verdict = "neither `view --show-profile-schema` nor `--show-profile-schema` printed a schema"
        return
    missing = schema.missing()
    times = sorted({unit for name, unit in schema.units.items() if name.endswith("_time")})
    step.details.append(f"Summary fields {len(schema.units)}; time unit(s): {', '.join(times) or 'not stated'}")
    step.details.append("fields (name: unit), for the 12.x map: " + ", ".join(
        f"{name}: {unit or '-'}" for name, unit in schema.units.items()))  # fmt: skip
    if missing:
        step.status = WARN
        step.details.append(f"named fields this schema lacks: {', '.join(missing)}")
        step.verdict = f"schema {schema.version}: {len(missing)} named fields missing: those columns stay null"
        return
    basis = "" if schema.major == int(REFERENCE_VERSION.split(".")[0]) else f" (read as {REFERENCE_VERSION}'s names)"
    step.verdict = f"schema {schema.version} names every field rows name{basis}"


def full_json_gone(state: Smoke) -> None:
    """Explorer 2.34+ writes no full JSON: the step says so instead of failing."""
    if explorer.view_format("json", state.toolchain.profiler, state.profiler_version) != "json":
        raise Skipped(f"{state.toolchain.profiler} {state.profiler_version} writes no full JSON (ended after 2.33)")
