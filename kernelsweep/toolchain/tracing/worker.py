"""The trace worker: one process per point, under the Neuron SDK's interpreter (tracing.interpreter).

It runs with the sweep's import path (the job carries it; the folders this process lacks, the user's
working folder among them, go on as a last resort, `kernelsweep.importpath`, so user kernels and the
tracers resolve as in the sweep and never in place of an installed module), imports the toolchain's
tracers by reference, and either reports what it found ("probe") or traces one point ("trace"): the
pinned tracer first, then, if its adapter does not fit this host's API (a TypeError or AttributeError
raised in the adapter itself, before the compiler ran: real-host audit 2, N1), the next ones, naming
each that fell through. The tracer's C-level stderr (fd 2, where neuronx-cc writes `[NCC_E...]` and
"Out of memory in sbuf") is captured, and on failure classified and kept with the error (N2). The
answer, or the classified error, goes to trace-result.json next to the job; the parent reads nothing
else, so a crash (no answer) is told apart from a kernel error (an answer with an error).

Runs on Python 3.10+ with numpy and the SDK only (interpreter.WORKER_MODULES).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelsweep import names
from kernelsweep.errors import CompileError, KernelsweepError, TraceError
from kernelsweep.importpath import append_last_resort
from kernelsweep.toolchain import compile_cost
from kernelsweep.toolchain.parent_death import GO
from kernelsweep.toolchain.tracing.calls import FRONTEND_ENV
from kernelsweep.toolchain.tracing.request import RESULT_FILE, Fallback, Tracer, TraceRequest, TracerStatus, pack

IR_ARCHIVE = "ir.tar"
STDERR_FILE = "tracer-stderr.log"
STDERR_KEPT_BYTES = 64 * 1024
# NKI's own allocator gave up and the compile went on with neuronx-cc's (NKI 0.7's default,
# CompileConfig.nki_alloc_fallback: "Fall back to the default neuronx-cc allocation flow when NKI's own
# LinearScanAllocation fails"). The compiler's wording is unpublished: these are the setting's words.
ALLOC_FALLBACK = re.compile(r"(?i)LinearScanAllocation.*fail|fall(?:s|ing)?\s*back to the default neuronx-cc alloc")


def load_tracer(ref: str) -> Tracer:
    module, _, attribute = ref.partition(":")
    tracer = getattr(importlib.import_module(module), attribute)
    if not isinstance(tracer, Tracer):
        raise TypeError(f"{ref} is a {type(tracer).__name__}, not a Tracer")
    return tracer


def status(tracer: Tracer) -> tuple[TracerStatus, Any]:
    """The tracer as this host has it, and its loaded API (None when unavailable)."""
    try:
        api = tracer.load()
    except Exception as exc:  # placeholder wheels raise at import; a signature mismatch raises TypeError
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        return TracerStatus(tracer.name, False, reason=reason, best_effort=tracer.best_effort), None
    signatures = getattr(api, "signatures", "")
    found = TracerStatus(
        tracer.name, True, api.variant, api.nki_version, best_effort=tracer.best_effort, signatures=signatures
    )
    return found, api


def _probe(tracers: list[Tracer], neuron_ls: list[str] | None, env: dict[str, str]) -> dict[str, Any]:
    from kernelsweep.toolchain.packages import SDK_PACKAGES, package_version

    found = {name: package_version(name) for name in SDK_PACKAGES}
    result: dict[str, Any] = {
        "statuses": [status(t)[0].__dict__ for t in tracers],
        "nki_compiler_frontend": os.environ.get(FRONTEND_ENV) or None,
        "packages": {name: version.version for name, version in found.items() if version.usable},
        "python": f"{sys.executable} (Python {sys.version.split()[0]})",
    }
    if neuron_ls:  # the APIs are imported now: does this process hold a NeuronCore?
        from kernelsweep.toolchain.process import run_tool

        listed = run_tool(neuron_ls, env=env, timeout_seconds=60)
        try:
            holders = {p.get("pid") for d in json.loads(listed.stdout) for p in d.get("neuron_processes") or []}
            result["holds_device"] = os.getpid() in holders
        except (ValueError, AttributeError, TypeError):
            result["holds_device"] = None
    return result


def _candidates(tracers: list[Tracer], wanted: str | None, unusable: list[str]) -> Iterator[tuple[Tracer, Any]]:
    """The pinned tracer (exactly its probed variant), then every later one this host has, minus the
    run's unusable ones; raises TracerUnavailable when none is left."""
    start = _pinned(tracers, wanted)
    found = []
    for tracer in tracers[start:]:
        if tracer.name in unusable:
            continue
        state, api = status(tracer)
        if api is not None and (tracer is not tracers[start] or not wanted or state.tracer_id == wanted):
            yield tracer, (state, api)
        else:
            found.append(state)
    raise _unavailable(found, wanted)


def _pinned(tracers: list[Tracer], wanted: str | None) -> int:
    """Where the tracers a point tries start: the probed one (`wanted`, "name/variant"), else the first."""
    return next((i for i, t in enumerate(tracers) if wanted and t.name == wanted.split("/")[0]), 0)


def _unavailable(found: list[TracerStatus], wanted: str | None) -> TraceError:
    from kernelsweep.toolchain.packages import SDK_PACKAGES, package_version

    tried = "; ".join(f"{s.name} ({s.reason or 'signature variant ' + repr(s.variant)})" for s in found) or "none"
    installed = ", ".join(package_version(name).describe() for name in SDK_PACKAGES)
    pinned = f"the probed tracer {wanted} is gone; " if wanted else ""
    return TraceError(
        f"no NKI tracing API is usable: {pinned}tried {tried}; installed: {installed}. Install the Neuron SDK "
        "from https://pip.repos.neuron.amazonaws.com (kernelsweep doctor shows details) or use --toolchain sim",
        error_class="TracerUnavailable",
    )


@contextmanager
def _captured_fd2(path: Path) -> Iterator[None]:
    """fd 2 into `path` while the tracer runs: the compiler writes its diagnostics there, not into
    the Python exception (awslabs/nki-autotune 97935bf does the same)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "wb") as handle:
        os.dup2(handle.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _tail(path: Path) -> str:
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - STDERR_KEPT_BYTES))
        return handle.read().decode("utf-8", "replace")


def _in_adapter(exc: BaseException, tracer: Tracer) -> bool:
    """Raised by the adapter's own code (or a call it made that did not bind), not inside the SDK
    or the kernel: the adapter does not fit this API. Every adapter calls the compiler last."""
    from kernelsweep.toolchain.tracing import calls

    frames = traceback.extract_tb(exc.__traceback__)
    adapter_files = {os.path.realpath(tracer.run.__code__.co_filename), os.path.realpath(calls.__file__)}
    return bool(frames) and os.path.realpath(frames[-1].filename) in adapter_files


def _clear(workdir: Path) -> None:
    """What a failed attempt left, so the next tracer starts as the first did."""
    shutil.rmtree(workdir / "ir", ignore_errors=True)
    (workdir / names.NEFF).unlink(missing_ok=True)


def _trace(tracers: list[Tracer], job: dict[str, Any], workdir: Path, fallbacks: list[Fallback]) -> dict[str, Any]:
    request = TraceRequest.from_json(job["request"])
    limit = job.get("memory_limit_bytes")
    for tracer, (state, api) in _candidates(tracers, job.get("tracer"), job.get("unusable", [])):
        started, before = time.perf_counter(), compile_cost.usage()
        try:
            with _captured_fd2(workdir / STDERR_FILE):
                products = tracer.run(api, request, workdir)
        except KernelsweepError:
            raise
        except MemoryError:  # past the cap (or the host's memory): the same compile would die again
            raise CompileError(
                f"{state.tracer_id}: {compile_cost.oom_message(limit)}", error_class="CompileOOM", retryable=False
            ) from None
        except (TypeError, AttributeError) as exc:
            if not _in_adapter(exc, tracer):
                raise _classified(exc, state, workdir) from exc
            fallbacks.append(Fallback(state.tracer_id, f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
            _clear(workdir)
            continue
        except Exception as exc:  # the tracer's own errors, classified once, here
            raise _classified(exc, state, workdir) from exc
        seconds, cost = time.perf_counter() - started, compile_cost.since(before, limit)
        answer = _answer(products, state, request, workdir, seconds, job.get("simulate", False))
        return {**answer, "compile_cost": cost.__dict__ if products.neff is not None else None}
    raise AssertionError("unreachable: _candidates raises when it runs out")


def _classified(exc: BaseException, state: TracerStatus, workdir: Path) -> KernelsweepError:
    from kernelsweep.toolchain.failures import trace_failure  # deferred: only a failing trace needs it

    return trace_failure(exc, state.tracer_id, traceback.format_exc(), _tail(workdir / STDERR_FILE))


def _answer(
    products: Any, state: TracerStatus, request: TraceRequest, workdir: Path, seconds: float, simulate: bool
) -> dict[str, Any]:
    neff = None
    if products.neff is not None:
        neff = workdir / names.NEFF
        if products.neff.resolve() != neff.resolve():
            shutil.move(str(products.neff), neff)
    pack(products.ir_dir, workdir / IR_ARCHIVE)
    answer = {
        "tracer": state.tracer_id,
        "nki_version": state.nki_version,
        "ir": IR_ARCHIVE,
        "neff": neff.name if neff else None,
        "trace_seconds": seconds - (products.compile_seconds or 0.0),
        "compile_seconds": products.compile_seconds,
        "compile_options": json.dumps(products.compile_options, sort_keys=True) if products.compile_options else None,
        "nki_compiler_frontend": os.environ.get(FRONTEND_ENV) or None,
        "alloc_fallback": bool(ALLOC_FALLBACK.search(_tail(workdir / STDERR_FILE))) if neff else None,
    }
    if simulate:
        from kernelsweep.toolchain.tracing.simulate import simulate_outputs

        answer["simulated_outputs"], answer["simulate_note"] = simulate_outputs(request, workdir)
    return answer


def _error(exc: KernelsweepError) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": exc.message,
        "error_class": exc.error_class,
        "retryable": exc.retryable,
        "stderr_tail": exc.stderr_tail,
    }


def _ready(tracers: list[Tracer], wanted: str | None) -> bool:
    """Load the tracer this point will most likely use (its SDK's imports), then wait for the go
    on stdin (kernelsweep.toolchain.process.Slots); False when stdin closes without one."""
    if tracers:
        status(tracers[_pinned(tracers, wanted)])  # imported modules stay imported: the trace's load finds them
    return sys.stdin.readline() == GO


def main(argv: list[str]) -> int:
    job_file = Path(argv[0])
    job = json.loads(job_file.read_text())
    compile_cost.apply_limit(job.get("memory_limit_bytes"))  # before the SDK is imported: its compiles too
    append_last_resort(job["sys_path"])  # the sweep's kernel modules, never in place of an installed one
    fallbacks: list[Fallback] = []
    try:
        tracers = [load_tracer(ref) for ref in job["tracers"]]
        if job.get("wait") and not _ready(tracers, job.get("tracer")):
            return 0  # no go: the sweep ended while this worker waited for a compile slot
        if job["mode"] == "probe":
            result = _probe(tracers, job.get("neuron_ls"), job.get("neuron_ls_env", {}))
        else:
            result = _trace(tracers, job, job_file.parent, fallbacks)
    except KernelsweepError as exc:
        result = {"error": _error(exc)}
    result["fallbacks"] = [f.__dict__ for f in fallbacks]
    (job_file.parent / RESULT_FILE).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    from kernelsweep.toolchain.parent_death import arm

    arm()  # first: this tool dies with the run that started it (process.run_tool)
    sys.exit(main(sys.argv[1:]))
