"""Tracing a kernel: the step that turns an NKI kernel into the IR a compiler takes, and on current
SDKs into the NEFF itself.

NKI's tracing APIs are semi-internal and changed twice in 2026 (reference Corrections 1), so a
toolchain carries several `Tracer`s, one per API generation, and the first whose API loads AND
whose signatures fit (probed with `inspect.signature`, never by import success alone) is used. Like
AWS's own harness, tracing and compiling never run in the sweep's process: each point is traced in
a spawned worker process (kernelsweep.toolchain.tracing.worker) with a timeout, so one compiler crash
or hang costs one point, process-global tracer state is never shared between points, and importing
the SDK never touches the runtime the sweep's captures use. The caller bounds the workers with the
compile slots; a worker started early imports its tracers while it waits for one (`Slots`), so a slot
is spent tracing and compiling, not starting Python and the SDK.

The worker runs under the Neuron SDK's own interpreter (kernelsweep.toolchain.tracing.interpreter),
with the point's target and LNC in NEURON_PLATFORM_TARGET_OVERRIDE and NEURON_LOGICAL_NC_CONFIG: NKI
0.7 takes a kernel's LNC from that variable, and rejects a kernel/compiler mismatch (NCC_EVRF066).
A tracer whose adapter does not fit this host's API is skipped for the rest of the run
(`TracerChoice`); timeouts are never retried: a point that does not compile in the limit will not
in the next one either (real-host audit 2, N5).

Tracers are handed to the worker by import reference (`Tracer.ref`); the real ones live in
kernelsweep.toolchain.tracing.tracers, the simulator's in kernelsweep.sim.tracer.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tarfile
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelsweep.errors import CompileError, KernelsweepError, TraceError
from kernelsweep.toolchain.tracing.interpreter import own_python, worker_argv, worker_env, worker_path
from kernelsweep.toolchain.tracing.request import (
    RESULT_FILE,
    Fallback,
    TraceOutput,
    Tracer,
    TraceRequest,
    TracerProbe,
    TracerStatus,
)

if TYPE_CHECKING:
    from kernelsweep.locks import CoreLease
    from kernelsweep.toolchain.process import Slots
    from kernelsweep.toolchain.resolve import Toolchain

logger = logging.getLogger(__name__)
JOB_FILE = "trace-job.json"
PROBE_TIMEOUT_SECONDS = 120.0
# Removed from the worker's environment: the compile workers of awslabs/nki-autotune drop it too, so
# that importing the SDK cannot claim the NeuronCores a concurrent capture holds.
WORKER_UNSET = ("NEURON_RT_VISIBLE_CORES",)
# kernelsweep's own interpreter settings: meaningless, or harmful, to the SDK's interpreter.
FOREIGN_UNSET = ("PYTHONPATH", "PYTHONHOME")
# The SDK's debug-info setting: the compile writes kernel_debug_info.json into the NEFF, which maps
# each instruction to its NKI source line (Explorer glossary, SDK 2.33); NEURON_FRAMEWORK_DEBUG adds the
# "NKI Source Location" field to profiles (Explorer, how-to-link-view-source-code).
DEBUG_INFO_ENV = {"NKI_DEBUG_INFO": "True", "NEURON_FRAMEWORK_DEBUG": "1"}
# How an allocation past the worker's RLIMIT_AS dies when it cannot answer (a C++ compiler aborts)
OUT_OF_MEMORY = re.compile(r"MemoryError|std::bad_alloc|Cannot allocate memory")


class TracerChoice:
    """Which tracer a run's points start with, and which proved unusable on this host: one per run,
    shared by its points' threads. A fallback is learnt (and logged) once; every row it traced says so
    (`tracer_label`)."""

    def __init__(self, first: str | None) -> None:
        self._lock = threading.Lock()
        self._first = first
        self._unusable: dict[str, Fallback] = {}

    @property
    def first(self) -> str | None:
        with self._lock:
            return self._first

    @property
    def unusable(self) -> list[str]:
        with self._lock:
            return list(self._unusable)

    def learn(self, fallbacks: tuple[Fallback, ...], used: str | None) -> None:
        with self._lock:
            for fallback in fallbacks:
                if fallback.tracer not in self._unusable:
                    self._unusable[fallback.tracer] = fallback
                    logger.warning(
                        "tracer %s is unusable on this host (%s); this run traces with %s instead",
                        fallback.tracer, fallback.reason, used or "the next tracer",
                    )  # fmt: skip
            if used is not None and fallbacks:
                self._first = used

    def fell_through(self, used: str) -> tuple[str, ...]:
        """The tracers found unusable this run, which `used` stands in for."""
        with self._lock:
            return tuple(name for name in self._unusable if name != used)


def tracer_label(used: str, fell_through: tuple[str, ...]) -> str:
    """The row's tracer column: the tracer, and the ones that fell through before it this run."""
    return f"{used} (fallback: {', '.join(fell_through)} unusable)" if fell_through else used


def probe(
    toolchain: Toolchain,
    workdir: Path,
    timeout_seconds: float = PROBE_TIMEOUT_SECONDS,
    check_runtime_at_lnc: int | None = None,
) -> TracerProbe:
    """Ask a worker which of the toolchain's tracers this host can run (no kernel is traced); with
    `check_runtime_at_lnc`, also whether importing them made the worker hold a device (neuron-ls
    run at that LNC, as every listing is). The worker's files go in `workdir`, the caller's scratch
    folder (kernelsweep.this_host.scratch), so a run killed mid-probe leaves one the next run removes."""
    job: dict[str, Any] = {"mode": "probe"}
    if check_runtime_at_lnc is not None and "neuron-ls" in toolchain.commands:
        job["neuron_ls"] = toolchain.command("neuron-ls") + ["-j"]
        job["neuron_ls_env"] = {"NEURON_LOGICAL_NC_CONFIG": str(check_runtime_at_lnc)}
    argv, result, _ = _run_worker(toolchain, workdir, job, timeout_seconds, "probing tracers")
    _raise_error(result, argv)
    statuses = tuple(TracerStatus(**s) for s in result["statuses"])
    return TracerProbe(
        statuses,
        result.get("holds_device"),
        result.get("nki_compiler_frontend"),
        result.get("packages", {}),
        result.get("python", ""),
    )


def trace(
    toolchain: Toolchain,
    request: TraceRequest,
    workdir: Path,
    *,
    tracer: str | None = None,
    timeout_seconds: float,
    choice: TracerChoice | None = None,
    simulate: bool = False,
    debug_info: bool = False,
    memory_limit_bytes: int | None = None,
    slots: Slots | None = None,
    lease: Callable[[], AbstractContextManager[CoreLease]] | None = None,
) -> TraceOutput:
    """Trace (and, where the API does, compile) one point in a worker. `tracer` pins the probed
    choice; a `choice` (the run's) supplies it instead and learns the tracers found unusable. With
    `simulate`, the worker also runs the installed NKI's nki.simulate on the inputs; with
    `debug_info`, the compile writes the NEFF's kernel_debug_info.json (DEBUG_INFO_ENV); the worker
    caps its own address space at `memory_limit_bytes` (kernelsweep.toolchain.compile_cost). With `slots` (the
    host's compile slots), the worker starts and imports its tracers while it waits for one, and
    traces once it holds it. When none of the tracers that only compile is usable, a tracer that
    executes the kernel (NKI 0.7's nki.jit route) is tried last, in a fresh worker, holding a core
    from `lease` (none given: it is not tried)."""
    if choice is not None:
        tracer = choice.first
    job = {
        "mode": "trace",
        "tracer": tracer,
        "unusable": choice.unusable if choice else [],
        "simulate": simulate,
        "request": request.as_json(),
        "memory_limit_bytes": memory_limit_bytes,
    }
    env = {"NEURON_PLATFORM_TARGET_OVERRIDE": request.target, "NEURON_LOGICAL_NC_CONFIG": str(request.lnc)}
    env |= DEBUG_INFO_ENV if debug_info else {}
    what = f"tracing {request.nki_kernel}"
    compiling = tuple(t for t in toolchain.tracers if not t.executes)
    executing = tuple(t for t in toolchain.tracers if t.executes)
    fallbacks: tuple[Fallback, ...] = ()
    unavailable: dict[str, Any] = {}  # the compiling tracers' TracerUnavailable, when the last resort follows it
    last_resort = any(tracer == t.name for t in executing)
    if not last_resort:
        run = (toolchain, workdir, job, timeout_seconds, what, env, memory_limit_bytes, slots, compiling)
        argv, result, seconds = _run_worker(*run)
        fallbacks = tuple(Fallback(**f) for f in result.get("fallbacks", ()))
        error = result.get("error") or {}
        if executing and lease is not None and error.get("error_class") == "TracerUnavailable":
            passed = {f.tracer.split("/")[0] for f in fallbacks}
            fallbacks += tuple(Fallback(t.name, error["message"]) for t in compiling if t.name not in passed)
            last_resort, unavailable = True, error
    if last_resort:
        if lease is None:
            raise TraceError(f"{what}: {tracer} executes the kernel and needs a NeuronCore lease, which this "
                             "stage has none of", error_class="TracerUnavailable")  # fmt: skip
        argv, result, seconds = _executing(toolchain, request, workdir, job, timeout_seconds, env, lease, executing,
                                           memory_limit_bytes, slots)  # fmt: skip
        fallbacks += tuple(Fallback(**f) for f in result.get("fallbacks", ()))
        error = result.get("error") or {}
        if unavailable and error.get("error_class") == "TracerUnavailable":  # neither: say why for both
            result = {**result, "error": {**error, "message": f"{unavailable['message']} Then: {error['message']}"}}
    if choice is not None:
        choice.learn(fallbacks, result.get("tracer"))
    _raise_error(result, argv)
    return TraceOutput(
        ir_path=workdir / result["ir"],
        tracer=result["tracer"],
        nki_version=result["nki_version"],
        neff_path=workdir / result["neff"] if result["neff"] else None,
        trace_seconds=result["trace_seconds"],
        compile_seconds=result["compile_seconds"],
        fallbacks=fallbacks,
        compile_options=result.get("compile_options"),
        nki_compiler_frontend=result.get("nki_compiler_frontend"),
        simulated_outputs={name: workdir / file for name, file in (result.get("simulated_outputs") or {}).items()},
        simulate_note=result.get("simulate_note"),
        compile_cost=result.get("compile_cost"),
        worker_seconds=seconds,
        alloc_fallback=result.get("alloc_fallback"),
    )


def _executing(
    toolchain: Toolchain,
    request: TraceRequest,
    workdir: Path,
    job: dict[str, Any],
    timeout_seconds: float,
    env: Mapping[str, str],
    lease: Callable[[], AbstractContextManager[CoreLease]],
    tracers: tuple[Tracer, ...],
    memory_limit_bytes: int | None,
    slots: Slots | None,
) -> tuple[list[str], dict[str, Any], float]:
    """The tracers that execute the kernel, in a fresh worker started with NKI_ARTIFACTS_DIR (read
    when nki is imported) and the leased core as its only visible one, for as long as it runs."""
    from kernelsweep.toolchain.tracing.artifacts import ARTIFACTS_ENV, ARTIFACTS_FOLDER

    shutil.rmtree(workdir / ARTIFACTS_FOLDER, ignore_errors=True)
    alone = {**job, "tracer": None, "unusable": []}
    with lease() as held:
        env = {**env, ARTIFACTS_ENV: str(workdir / ARTIFACTS_FOLDER), "NEURON_RT_VISIBLE_CORES": held.visible_cores}
        what = f"tracing {request.nki_kernel} by executing it on core {held.visible_cores}"
        return _run_worker(toolchain, workdir, alone, timeout_seconds, what, env, memory_limit_bytes, slots, tracers)


def _run_worker(
    toolchain: Toolchain,
    workdir: Path,
    job: dict[str, Any],
    timeout_seconds: float,
    what: str,
    env: Mapping[str, str] | None = None,
    memory_limit_bytes: int | None = None,
    slots: Slots | None = None,
    tracers: tuple[Tracer, ...] | None = None,
) -> tuple[list[str], dict[str, Any], float]:
    """The worker's argv, its answer, and its wall time (from its go, when started early)."""
    from kernelsweep.toolchain.process import run_tool  # deferred: the worker imports this module, never runs tools

    python = toolchain.neuron_python or own_python()
    workdir.mkdir(parents=True, exist_ok=True)
    refs = [t.ref for t in (toolchain.tracers if tracers is None else tracers)]
    job = {**job, "tracers": refs, "sys_path": worker_path(python), "wait": bool(slots)}
    (workdir / RESULT_FILE).unlink(missing_ok=True)  # an earlier worker's answer is not this one's
    (workdir / JOB_FILE).write_text(json.dumps(job))
    argv = worker_argv(python, workdir, workdir / JOB_FILE, toolchain.env)
    result = run_tool(
        argv,
        cwd=workdir,
        env={**toolchain.env, **worker_env(python), **(env or {})},
        unset=WORKER_UNSET + (FOREIGN_UNSET if python.foreign else ()),
        timeout_seconds=timeout_seconds,
        slots=slots,
    )
    if result.timed_out:  # deterministic: the same kernel will not compile faster on a retry
        raise TraceError(
            f"{what} timed out after {timeout_seconds:g} s; shrink the shape (every loop is unrolled) "
            "or raise the limit", error_class="Timeout", retryable=False, argv=argv, stderr_tail=result.output,
        )  # fmt: skip
    answer = workdir / RESULT_FILE
    if not answer.is_file() and memory_limit_bytes and OUT_OF_MEMORY.search(result.output):
        from kernelsweep.toolchain.compile_cost import oom_message  # deferred: the worker imports this module

        raise CompileError(
            f"{what}: {oom_message(memory_limit_bytes)}", error_class="CompileOOM", retryable=False, argv=argv,
            returncode=result.returncode, stderr_tail=result.output,
        )  # fmt: skip
    if not answer.is_file():
        lines = [line for line in result.output.splitlines() if line.strip()]
        raise TraceError(
            f"{what}: the trace worker died (exit {result.returncode}) under {python.path}: "
            f"{lines[-1] if lines else 'no output'}",
            error_class="TracerCrash",
            argv=argv,
            returncode=result.returncode,
            stderr_tail=result.output,
        )
    return argv, json.loads(answer.read_text()), result.seconds


_ERROR_TYPES: dict[str, type[KernelsweepError]] = {"TraceError": TraceError, "CompileError": CompileError}


def _raise_error(answer: Mapping[str, Any], argv: list[str]) -> None:
    """The worker's error, as the error type the stage reports (a tracer that compiles can fail compiling)."""
    error = answer.get("error")
    if error is None:
        return
    error_type = _ERROR_TYPES.get(error["type"], TraceError)
    raise error_type(
        error["message"],
        retryable=error["retryable"],
        error_class=error["error_class"],
        argv=argv,
        stderr_tail=error.get("stderr_tail"),
    )


def unpack(archive: Path, folder: Path) -> Path:
    """The IR folder back from its tar (the compile stage's input)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(folder, filter="data")
        else:  # Python 3.11.0-3.11.3 (Debian 12's python3.11 is 3.11.2) has no extraction filters
            tar.extractall(folder, members=_files_and_folders_inside(tar, archive, folder))
    return folder


def _files_and_folders_inside(tar: tarfile.TarFile, archive: Path, folder: Path) -> list[tarfile.TarInfo]:
    """The archive's members when each is a file or folder landing inside `folder`, as the "data" filter
    requires of the IR folders `tracing.request.pack` makes, with the mode bits that filter drops
    (setuid, setgid, sticky, group and other write) dropped; else a TarError (as that filter raises)
    before anything is written."""
    root = folder.resolve()
    members = tar.getmembers()
    for member in members:
        if not (member.isfile() or member.isdir()) or not (root / member.name).resolve().is_relative_to(root):
            raise tarfile.TarError(f"{archive}: {member.name!r} is not a file or folder inside the IR folder")
        member.mode &= 0o755
    return members
