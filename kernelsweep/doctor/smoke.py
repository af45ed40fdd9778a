"""`kernelsweep doctor --smoke`: the real instruction mix through trace, compile, capture and view on
this host, each step showing the commands it ran, their output, a verdict and the risks it rules out
(kernelsweep.doctor.risks), plus a report file for a bug report.

It is the first thing to run on a new Neuron instance. Every tool call goes through the same adapters
a sweep uses (the runs are recorded by kernelsweep.toolchain.process). The point is a bf16 matmul
that gives each core of LNC=2 work, and a bf16 MLP follows it (kernelsweep.doctor.smoke_mix); the
steps also ask the questions no document answers: the `neuron-explorer --version` format; whether
importing the SDK holds a core; the compile API's signatures (NKI 0.7's are unpublished); what
`_write_tensorizer_ir` writes; whether `+=` on an NkiTensor traces; how many summary entries a
profile has at LNC=2; whether DGE notifications change the DMA figures; the profile schema's
version and names; the full-JSON view's files; whether the Parquet view returns without
`--ingest-only`; the busy-core wording of this runtime.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kernelsweep.doctor import smoke_mix
from kernelsweep.doctor.smoke_steps import (
    FAIL,
    INFO,
    OK,
    SKIP,
    WARN,
    Skipped,
    Smoke,
    Step,
    correctness,
    devices,
    needs,
    ntff_listing,
    versions_step,
)
from kernelsweep.errors import KernelsweepError
from kernelsweep.kernels import load_kernel
from kernelsweep.kernels.probes import plus_equals_probe
from kernelsweep.platforms import get_platform
from kernelsweep.profiles.metrics import read_profile
from kernelsweep.sim.config import sim_env
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import profiler, tracing
from kernelsweep.toolchain.failures import capture_failure
from kernelsweep.toolchain.process import recording, run_tool
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.tracing.tracers import TENSORIZER_IR

PARQUET_PROBE_SECONDS = 30.0
STEP_TIMEOUT_SECONDS = 900.0


def smoke_point(platform: str) -> Point:
    """The bf16 matmul of the real-host audit (N6): two 512-wide n tiles, one per core at LNC=2."""
    return smoke_mix.mix_point("matmul", platform)


def run_smoke(toolchain: Toolchain, point: Point, workdir: Path) -> Iterator[Step]:
    """The steps, each yielded as soon as it is done; a failed step skips those that need its result."""
    state = Smoke(toolchain, point, workdir)
    for title, check, risks in STEPS:
        step = Step(title, risks=risks)
        with recording() as runs:
            try:
                check(state, step)
            except KernelsweepError as exc:
                step.status, step.verdict = FAIL, exc.message
                if exc.stderr_tail and not runs:
                    step.details.append(exc.stderr_tail)
            except Skipped as exc:
                step.status, step.verdict = SKIP, str(exc)
        step.runs = list(runs)
        yield step


# --- steps that need the traced NEFF --------------------------------------------------------------


def _trace(state: Smoke, step: Step) -> None:
    request = tracing.TraceRequest.for_point(state.point, load_kernel(state.point.kernel_ref), state.target)
    out = tracing.trace(state.toolchain, request, state.workdir / "trace", tracer=state.tracer,
                        timeout_seconds=STEP_TIMEOUT_SECONDS, lease=state.lease)  # fmt: skip
    state.neff = out.neff_path or state.compile_legacy(out.ir_path)
    info = state.neff_info()
    step.details += [f"trace {out.trace_seconds:.1f} s, of which compile {out.compile_seconds or 0:.1f} s"]
    step.details += [f"IR archive: {', '.join(_members(out.ir_path)) or 'empty'}"]
    step.details += [
        f"NEFF header name {info.name!r}, packaging_version {info.packaging_version}, num_tpb {info.num_tpb}"
    ]
    step.details += [f"NEFF inputs {info.inputs}, outputs {info.outputs} (sg00/def.json order)"]
    step.verdict = f"{out.tracer} (nki {out.nki_version}) wrote {state.neff.name}"
    if info.outputs != ["out"]:
        step.status = WARN
        step.verdict += f"; its outputs are named {info.outputs}, not ['out']: they are mapped back by position"


def _tensorizer_ir(state: Smoke, step: Step) -> None:
    if state.toolchain.is_simulation:
        raise Skipped("the simulated toolchain has no neuronxcc.nki_standalone")
    only = dataclasses.replace(state.toolchain, tracers=(TENSORIZER_IR,))
    request = tracing.TraceRequest.for_point(state.point, load_kernel(state.point.kernel_ref), state.target)
    try:
        out = tracing.trace(
            only, request, state.workdir / "tensorizer", tracer=None, timeout_seconds=STEP_TIMEOUT_SECONDS
        )
    except KernelsweepError as exc:
        if exc.error_class == "TracerUnavailable":  # most current SDKs: nothing to ask
            raise Skipped("neuronxcc.nki_standalone's trace-only API is not installed") from None
        raise
    step.status, step.verdict = INFO, f"_write_tensorizer_ir wrote: {', '.join(_members(out.ir_path)) or 'nothing'}"


def _plus_equals(state: Smoke, step: Step) -> None:
    probe = {"kernel": "plus_equals_probe", "kernel_ref": "kernelsweep.kernels.probes:plus_equals_probe"}
    point = state.point.model_copy(update={**probe, "params": {"M": 128, "K": 256, "N": 512}})
    request = tracing.TraceRequest.for_point(point, plus_equals_probe, state.target)
    step.status = INFO
    try:
        tracing.trace(
            state.toolchain,
            request,
            state.workdir / "plus-equals",
            tracer=state.tracer,
            timeout_seconds=STEP_TIMEOUT_SECONDS,
            lease=state.lease,
        )
    except KernelsweepError as exc:
        step.verdict = f"refused: {exc.message}"
    else:
        step.verdict = "accepted: `acc += nl.matmul(...)` traces and compiles with this NKI"


def _capture(state: Smoke, step: Step) -> None:
    neff = needs(state.neff, "a NEFF")
    run_dir = state.fresh("capture")
    result = profiler.capture(
        state.toolchain,
        neff,
        state.input_files(run_dir),
        run_dir,
        num_exec=4,
        profile_nth_exec=2,
        visible_cores=state.core,
        lnc=state.point.lnc,
        timeout_seconds=STEP_TIMEOUT_SECONDS,
        dge_notifs=get_platform(state.point.platform).dge_notifs_default,  # as a sweep captures here
    )
    state.ntff, state.saved = result.ntff, result.outputs
    written = ntff_listing(run_dir)
    step.details.append(f"NTFFs written: {', '.join(written)}; saved outputs: {sorted(result.outputs)}")
    if result.note:
        step.details.append(result.note)
    expected = profiler.expected_ntff_names(4, 2)
    step.status = OK if written == expected else WARN
    step.verdict = f"--num-exec=4 --profile-nth-exec=2 wrote {written} (expected every 2nd: {expected})"


def _summary_json(state: Smoke, step: Step) -> None:
    view = profiler.view(
        state.toolchain,
        needs(state.neff, "a NEFF"),
        needs(state.ntff, "an NTFF"),
        state.fresh("summary-json"),
        STEP_TIMEOUT_SECONDS,
        "summary-json",
    )
    path, view_warning = view.path, view.dma_warning
    entries = json.loads(path.read_text())
    keys = list(entries) if isinstance(entries, dict) else []
    state.metrics = state.read_metrics(path, step)
    step.details.append(f"top-level keys: {keys[:6]}{' ...' if len(keys) > 6 else ''}")
    count = state.metrics.entries
    step.verdict = f"{count} summary entr{'y' if count == 1 else 'ies'} at LNC={state.point.lnc}"
    if count > 1:
        step.verdict += ": rows combine them (max of times, sum of counters; docs/schema.md); the next steps judge it"
    if view_warning:
        step.details.append(f"view warning: {view_warning}")


def _full_json(state: Smoke, step: Step) -> None:
    smoke_mix.full_json_gone(state)
    folder = state.fresh("json")
    profiler.view(
        state.toolchain, needs(state.neff, "a NEFF"), needs(state.ntff, "an NTFF"), folder, STEP_TIMEOUT_SECONDS, "json"
    )
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    head = (folder / profiler.PROFILE_JSON_NAME).read_bytes()[:200].decode(errors="replace")
    step.status, step.verdict = INFO, f"full JSON view wrote {files}"
    step.details.append(f"profile.json starts: {head!r}")


def _parquet(state: Smoke, step: Step) -> None:
    if state.toolchain.profiler != "neuron-explorer":
        raise Skipped("Parquet output needs neuron-explorer")
    neff, ntff = needs(state.neff, "a NEFF"), needs(state.ntff, "an NTFF")
    folder = profiler.view(state.toolchain, neff, ntff, state.fresh("parquet"), STEP_TIMEOUT_SECONDS, "parquet").path
    metrics = read_profile(folder)
    step.details.append(f"read: {metrics.entries} entries, schema {metrics.schema.version} ({metrics.schema.source})")
    step.details.append(f"with --ingest-only: {sorted(p.name for p in folder.iterdir())}")
    plain = profiler.view_argv(state.toolchain, str(neff), str(ntff), "parquet")[:-2]  # no --ingest-only
    probe_dir = state.fresh("parquet-plain")
    result = run_tool(plain, cwd=probe_dir, env=state.toolchain.env, timeout_seconds=PARQUET_PROBE_SECONDS)
    returned = (
        f"returned (exit {result.returncode})"
        if not result.timed_out
        else (f"did not return within {PARQUET_PROBE_SECONDS:g} s (killed)")
    )
    step.status, step.verdict = OK, f"--ingest-only view wrote Summary; without --ingest-only the view {returned}"


def _busy_wording(state: Smoke, step: Step) -> None:
    """Two captures on one core at once: what does this runtime say to the one that loses?"""
    neff = needs(state.neff, "a NEFF")
    holder_dir, contender_dir = state.fresh("holder"), state.fresh("contender")
    # a slow holder: many executions on hardware; emulated latency on the simulator (ignored elsewhere)
    slow = dataclasses.replace(state.toolchain, env={**state.toolchain.env, **sim_env(time_scale=1)})
    outcome: list[BaseException] = []
    settings: dict = dict(visible_cores=state.core, lnc=state.point.lnc, timeout_seconds=STEP_TIMEOUT_SECONDS)

    def hold() -> None:
        try:
            inputs = state.input_files(holder_dir)
            profiler.capture(slow, neff, inputs, holder_dir, num_exec=2000, profile_nth_exec=2000, **settings)
        except KernelsweepError as exc:
            outcome.append(exc)

    holder = threading.Thread(target=contextvars.copy_context().run, args=(hold,))  # its runs are recorded too
    holder.start()
    files = {name: str(path) for name, path in state.input_files(contender_dir).items()}
    argv = profiler.capture_argv(state.toolchain, str(neff), files, num_exec=1, profile_nth_exec=None)
    env = {
        **state.toolchain.env,
        "NEURON_RT_VISIBLE_CORES": state.core,
        "NEURON_LOGICAL_NC_CONFIG": str(state.point.lnc),
    }
    deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
    while holder.is_alive() and time.monotonic() < deadline:  # whichever loses the core tells us the wording
        result = run_tool(
            argv, cwd=contender_dir, env=env, unset=profiler.CAPTURE_UNSET, timeout_seconds=STEP_TIMEOUT_SECONDS
        )
        if result.returncode != 0:
            outcome.append(capture_failure(result, state.toolchain.profiler))
            break
    holder.join(timeout=STEP_TIMEOUT_SECONDS)
    if not outcome:
        step.status, step.verdict = INFO, "not exercised: the two captures never overlapped"
        return
    error = outcome[0]
    recognised = getattr(error, "error_class", None) == "DeviceBusy"
    step.status = OK if recognised else WARN
    step.verdict = f"the capture that lost the core got {getattr(error, 'error_class', '?')}: {error}"
    if not recognised:
        step.verdict += " (not recognised as a busy core: please report this wording)"


def _members(archive: Path) -> list[str]:
    import tarfile

    with tarfile.open(archive) as tar:
        return sorted(m.name for m in tar.getmembers() if m.isfile())


Check = Callable[[Smoke, Step], None]
STEPS: tuple[tuple[str, Check, tuple[str, ...]], ...] = (
    ("devices: neuron-ls under the sweep's LNC", devices, ("F17",)),
    ("versions: compiler and profiler", versions_step, ()),
    ("tracers: which NKI API this host has", lambda s, step: s.probe(step), ("N7",)),
    ("signatures: the SDK's compile API, as installed", smoke_mix.driver_signatures, ("O1",)),
    ("trace and compile the bf16 matmul", _trace, ("N1",)),
    ("trace and compile the matmul at non-default tunables", smoke_mix.tuned, ("R2",)),
    ("what _write_tensorizer_ir writes", _tensorizer_ir, ()),
    ("does `acc += nl.matmul(...)` trace", _plus_equals, ("O5",)),
    ("capture: every 2nd of 4 executions", _capture, ()),
    ("outputs: saved by name, checked against numpy", correctness, ("N6",)),
    ("view: summary-json, its entries at this LNC", _summary_json, ("N4",)),
    ("plausibility: time, MFU, hardware FLOPs", smoke_mix.plausibility, ("N4", "N6")),
    ("summary entries: which reading of them held", smoke_mix.lnc_reading, ("R6",)),
    ("DGE notifications: a capture with and one without", smoke_mix.dge_comparison, ("N3",)),
    ("the bf16 MLP: trace, capture, outputs, plausibility", smoke_mix.mlp, ("N6", "N7")),
    ("profile schema: what this Explorer names", smoke_mix.profile_schema, ("C3",)),
    ("view: full JSON", _full_json, ()),
    ("view: Parquet, with and without --ingest-only", _parquet, ("F16",)),
    ("busy core: a second capture on a held core", _busy_wording, ()),
)
