"""One result row per point: identity, status, metrics, derived figures, correctness, lineage.

Failed points are rows too, with the stage, error class and message, and every artifact made
before the failure; their metric columns stay null, never zero.
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from kernelsweep.artifacts import ArtifactRef
from kernelsweep.kernels import load_kernel
from kernelsweep.platforms import get_platform
from kernelsweep.results.schema import PARAM_PREFIX, SCHEMA_VERSION
from kernelsweep.spec import Point
from kernelsweep.stages import CaptureOutcome, CompileResult, ExtractResult, InputsResult, TraceResult, describe
from kernelsweep.toolchain.versions import ToolVersions

_ROW_NAMESPACE = uuid.UUID("5f0c8a3e-7b1d-4c1e-9a51-6b8f0e2d4c77")


@dataclass
class PointRecord:
    """What one point's chain produced, filled in stage by stage; the flow owns it."""

    point: Point
    started_at: datetime
    finished_at: datetime | None = None
    trace: TraceResult | None = None
    compiled: CompileResult | None = None
    inputs: InputsResult | None = None
    captured: CaptureOutcome | None = None
    extracted: ExtractResult | None = None
    error: BaseException | None = None
    error_stage: str | None = None
    task_run_ids: dict[str, str] = field(default_factory=dict)


def row_id(flow_run_id: str, point: Point) -> str:
    """Stable for a (flow run, point) pair, so a retried store writes the same row."""
    return str(uuid.uuid5(_ROW_NAMESPACE, f"{flow_run_id}/{point.point_id}"))


def build_row(
    record: PointRecord, *, flow_run_id: str, toolchain: str, is_simulation: bool, versions: ToolVersions
) -> dict:
    point = record.point
    row: dict = {
        "schema_version": SCHEMA_VERSION,
        "row_id": row_id(flow_run_id, point),
        "sweep": point.sweep,
        "kernel": point.kernel,
        "kernel_ref": point.kernel_ref,
        "shape": point.shape,
        "params": dict(point.params),
        "dtype": point.dtype,
        "platform": point.platform,
        "lnc": point.lnc,
        "seed": point.seed,
        "toolchain": toolchain,
        "is_simulation": is_simulation,
        "host": socket.gethostname(),
        **versions.as_row(),
        "flow_run_id": flow_run_id,
        "task_run_ids": dict(record.task_run_ids),
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        **{PARAM_PREFIX + axis: value for axis, value in point.params.items()},
    }
    row |= _status(record)
    row |= _derived(point)
    row |= _lineage(record)
    if record.extracted is not None:
        row |= _measured(point, record.extracted, row)
    return row


def _status(record: PointRecord) -> dict:
    if record.error is None:
        return {"status": "ok"}
    error_class, message = describe(record.error)
    return {"status": "failed", "error_stage": record.error_stage, "error_class": error_class, "error_message": message}


def _derived(point: Point) -> dict:
    """Cost-model figures and the roofline bound: known before anything runs."""
    cost = load_kernel(point.kernel_ref).cost(point.params, point.dtype)
    platform = get_platform(point.platform)
    compute_s = cost.flops / platform.peak_flops(point.dtype, point.lnc)
    memory_s = cost.hbm_bytes / platform.hbm_bandwidth(point.lnc)
    return {
        "cost_flops": cost.flops,
        "cost_hbm_bytes": cost.hbm_bytes,
        "roofline_us": max(compute_s, memory_s) * 1e6,
        "roofline_bound": "compute" if compute_s >= memory_s else "memory",
    }


def _measured(point: Point, extracted: ExtractResult, row: dict) -> dict:
    metrics = extracted.metrics
    total_us = metrics.values["total_time_us"]
    platform = get_platform(point.platform)
    out = dict(metrics.values)
    out |= {
        "extra_metrics": {k: float(v) for k, v in metrics.extra.items() if v is not None},
        "profile_format": metrics.source_format,
        "profile_percent_unit": metrics.percent_unit,
        "profile_schema_version": metrics.info.get("profile_schema_version"),
        "achieved_tflops": row["cost_flops"] / (total_us * 1e-6) / 1e12,
        "mfu_percent": 100 * row["cost_flops"] / (total_us * 1e-6) / platform.peak_flops(point.dtype, point.lnc),
        "roofline_percent": 100 * row["roofline_us"] / total_us,
    }
    for name in ("runtime_version", "profiler_version", "instance_type"):  # what the profile says ran wins
        if metrics.info.get(name):
            out[name] = metrics.info[name]
    latency = extracted.latency
    out |= {
        "repeats": latency.repeats,
        "latency_median_us": latency.median_us,
        "latency_min_us": latency.min_us,
        "latency_max_us": latency.max_us,
        "latency_p90_us": latency.p90_us,
        "latency_p99_us": latency.p99_us,
    }
    c = extracted.correctness
    out |= {
        "max_abs_error": c.max_abs_error,
        "max_rel_error": c.max_rel_error,
        "atol": c.atol,
        "rtol": c.rtol,
        "correct": c.passed,
    }
    return out


def _artifact(name: str, ref: ArtifactRef | None) -> dict:
    return {f"{name}_uri": ref.uri, f"{name}_sha256": ref.sha256} if ref else {}


def _artifact_list(refs: dict[str, ArtifactRef]) -> list[dict]:
    return [{"name": n, "uri": r.uri, "sha256": r.sha256, "size_bytes": r.size_bytes} for n, r in refs.items()]


def _lineage(record: PointRecord) -> dict:
    out: dict = {}
    if record.trace:
        out |= _artifact("kernel_source", record.trace.kernel_source) | _artifact("ir", record.trace.ir)
        out |= {"tracer": record.trace.tracer, "trace_seconds": record.trace.seconds}
        out["trace_cache_hit"] = record.trace.cache_hit
    if record.compiled:
        out |= _artifact("neff", record.compiled.neff)
        out |= {"compiler_version": record.compiled.compiler_version, "compile_seconds": record.compiled.seconds}
        out["compile_cache_hit"] = record.compiled.cache_hit
    if record.inputs:
        out["inputs"] = _artifact_list(record.inputs.inputs)
    if record.captured:
        out |= _artifact("ntff", record.extracted.ntff if record.extracted else record.captured.ntffs[0])
        out |= {"outputs": _artifact_list(record.captured.outputs), "visible_cores": record.captured.visible_cores}
        out["capture_seconds"] = record.captured.seconds
    if record.extracted:
        out |= _artifact("profile", record.extracted.profile)
    return out
