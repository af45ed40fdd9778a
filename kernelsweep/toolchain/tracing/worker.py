"""The trace worker: `python -P -m kernelsweep.toolchain.tracing.worker JOB.json`, one process per point.

It runs with the sweep's import path (the job carries it; the folders this process lacks, the
user's working folder among them, go on as a last resort, `kernelsweep.importpath`, so user kernels
and the tracers resolve as in the sweep and never in place of an installed module), imports the
toolchain's tracers by reference, probes each (`Tracer.load`), and either reports what it found
("probe") or traces one point with the chosen tracer ("trace").
The answer, or the classified error, goes to trace-result.json next to the job; the parent reads
nothing else, so a crash (no answer) is told apart from a kernel error (an answer with an error).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from kernelsweep import names
from kernelsweep.errors import KernelsweepError, TraceError
from kernelsweep.importpath import append_last_resort
from kernelsweep.toolchain.tracing import RESULT_FILE, Tracer, TraceRequest, TracerStatus, pack

IR_ARCHIVE = "ir.tar"


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
    result: dict[str, Any] = {"statuses": [status(t)[0].__dict__ for t in tracers]}
    if neuron_ls:  # the APIs are imported now: does this process hold a NeuronCore?
        from kernelsweep.toolchain.process import run_tool

        listed = run_tool(neuron_ls, env=env, timeout_seconds=60)
        try:
            holders = {p.get("pid") for d in json.loads(listed.stdout) for p in d.get("neuron_processes") or []}
            result["holds_device"] = os.getpid() in holders
        except (ValueError, AttributeError, TypeError):
            result["holds_device"] = None
    return result


def _choose(tracers: list[Tracer], wanted: str | None) -> tuple[Tracer, TracerStatus, Any]:
    found = []
    for tracer in tracers:
        if wanted is not None and tracer.name != wanted.split("/")[0]:
            continue
        state, api = status(tracer)
        if api is not None and (wanted is None or state.tracer_id == wanted):
            return tracer, state, api
        found.append(state)
    from kernelsweep.toolchain.versions import SDK_PACKAGES, package_version

    tried = "; ".join(f"{s.name} ({s.reason or 'signature variant ' + repr(s.variant)})" for s in found) or "none"
    installed = ", ".join(package_version(name).describe() for name in SDK_PACKAGES)
    pinned = f"the probed tracer {wanted} is gone; " if wanted else ""
    raise TraceError(
        f"no NKI tracing API is usable: {pinned}tried {tried}; installed: {installed}. Install the Neuron SDK "
        "from https://pip.repos.neuron.amazonaws.com (kernelsweep doctor shows details) or use --toolchain sim",
        error_class="TracerUnavailable",
    )


def _trace(tracers: list[Tracer], job: dict[str, Any], workdir: Path) -> dict[str, Any]:
    tracer, state, api = _choose(tracers, job.get("tracer"))
    request = TraceRequest.from_json(job["request"])
    started = time.perf_counter()
    try:
        products = tracer.run(api, request, workdir)
    except KernelsweepError:
        raise
    except Exception as exc:  # the tracer's own errors, classified once, here
        import traceback

        from kernelsweep.toolchain.failures import trace_failure  # deferred: only a failing trace needs it

        raise trace_failure(exc, state.tracer_id, traceback.format_exc()) from exc
    seconds = time.perf_counter() - started
    neff = None
    if products.neff is not None:
        neff = workdir / names.NEFF
        if products.neff.resolve() != neff.resolve():
            shutil.move(str(products.neff), neff)
    pack(products.ir_dir, workdir / IR_ARCHIVE)
    return {
        "tracer": state.tracer_id,
        "nki_version": state.nki_version,
        "ir": IR_ARCHIVE,
        "neff": neff.name if neff else None,
        "trace_seconds": seconds - (products.compile_seconds or 0.0),
        "compile_seconds": products.compile_seconds,
    }


def _error(exc: KernelsweepError) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": exc.message,
        "error_class": exc.error_class,
        "retryable": exc.retryable,
        "stderr_tail": exc.stderr_tail,
    }


def main(argv: list[str]) -> int:
    job_file = Path(argv[0])
    job = json.loads(job_file.read_text())
    append_last_resort(job["sys_path"])  # the sweep's kernel modules, never in place of an installed one
    try:
        tracers = [load_tracer(ref) for ref in job["tracers"]]
        if job["mode"] == "probe":
            result = _probe(tracers, job.get("neuron_ls"), job.get("neuron_ls_env", {}))
        else:
            result = _trace(tracers, job, job_file.parent)
    except KernelsweepError as exc:
        result = {"error": _error(exc)}
    (job_file.parent / RESULT_FILE).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
