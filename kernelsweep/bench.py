"""One point, measured the way a sweep measures it, as one JSON object: `kernelsweep bench`.

Autotuners and agent loops compile, check and benchmark one candidate hundreds of times; a sweep's
spec, flow run and Parquet cost seconds before any tool runs. The command runs the sweep's chain
(kernelsweep.chain) in this process, with the same stage context (toolchain, artifact store and its
trace and compile caches, NeuronCore leases) a flow run prepares, and builds the same row; `as_json`
is what it prints. Nothing here starts Prefect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelsweep.profiles.metrics import METRIC_FIELDS
from kernelsweep.results.rows import Row

if TYPE_CHECKING:
    from kernelsweep.sweepspec.models import SweepSpec
    from kernelsweep.sweepspec.point import Point
    from kernelsweep.this_host import Locations


def measure(spec: SweepSpec, point: Point, locations: Locations, run_id: str) -> tuple[Row, float, str | None]:
    """Prepare the stage context as a flow run would, measure the point through the sweep's chain and
    build its row: (the row, the tools' seconds, the context's notices). `bench` and each step of a
    bisection measure through here, so both hit the sweep's trace and compile caches."""
    from kernelsweep.chain import run_stages
    from kernelsweep.errors import UsageError
    from kernelsweep.results import build_row
    from kernelsweep.this_host import prepare
    from kernelsweep.toolchain import recording

    with recording() as runs:
        ctx, notice = prepare(spec, locations)
        if not ctx.host.runs(point.platform):
            raise UsageError(f"this host captures {ctx.host.family} points only; give a {ctx.host.family} point here")
        record = run_stages(ctx, point)
    assert record is not None  # only a stopped context ends a chain without a record, and nothing stops this one
    kind, simulated = ctx.toolchain.kind, ctx.toolchain.is_simulation
    row = build_row(
        record, flow_run_id=run_id, toolchain=kind, is_simulation=simulated, versions=ctx.versions, host=ctx.host_name
    )
    return row, sum(r.seconds for r in runs), notice


def as_json(row: Row, tool_seconds: float) -> dict[str, Any]:
    """The row as one JSON object: what ran, how fast, whether right, why, at what compile cost."""
    ok = row.status == "ok"
    return {
        "kernel": row.kernel,
        "kernel_ref": row.kernel_ref,
        "shape": row.shape,
        "dtype": row.dtype,
        "platform": row.platform,
        "lnc": row.lnc,
        "status": row.status,
        "error": None if ok else {"stage": row.error_stage, "class": row.error_class, "message": row.error_message},
        "simulated": row.is_simulation,
        "latency_us": _latency(row),
        "iterations": _iterations(row),
        "metrics": {name: row.metrics[name] for name, _ in METRIC_FIELDS if row.metrics.get(name) is not None},
        "derived": {
            "achieved_tflops": row.achieved_tflops,
            "mfu_percent": row.mfu_percent,
            "roofline_us": row.roofline_us,
            "roofline_percent": row.roofline_percent,
            "roofline_bound": row.roofline_bound,
        },
        "correctness": {
            "correct": row.correct,
            "max_abs_error": row.max_abs_error,
            "max_rel_error": row.max_rel_error,
            "atol": row.atol,
            "rtol": row.rtol,
            "source": row.correctness_source,
        },
        "bound": {"engine": row.bound_engine, "active_percent": row.bound_active_percent, "why": row.bound_why},
        "hotspots": row.hotspots,
        "hotspots_note": row.hotspots_note,
        "compile": {
            "seconds": row.compile_seconds,
            "cache_hit": row.compile_cache_hit,
            "peak_rss_bytes": row.compile_peak_rss_bytes,
            "cpu_seconds": row.compile_cpu_seconds,
        },
        "trace": {"seconds": row.trace_seconds, "cache_hit": row.trace_cache_hit, "tracer": row.tracer},
        "versions": {
            "compiler": row.compiler_version,
            "runtime": row.runtime_version,
            "profiler": row.profiler_version,
            "nki": row.nki_version,
        },
        "row_id": row.row_id,
        "tool_seconds": round(tool_seconds, 3),
    }


def _latency(row: Row) -> dict[str, Any] | None:
    if row.latency_median_us is None:
        return None
    return {
        "repeats": row.repeats,
        "median": row.latency_median_us,
        "min": row.latency_min_us,
        "max": row.latency_max_us,
        "p90": row.latency_p90_us,
        "p99": row.latency_p99_us,
        "samples": row.latencies_us,
    }


def _iterations(row: Row) -> dict[str, Any] | None:
    if not row.iterations:
        return None
    return {
        "n": row.iterations,
        "median_us": row.iteration_median_us,
        "p99_us": row.iteration_p99_us,
        "samples_us": row.iteration_latencies_us,
        "tool": row.iteration_tool,
    }
