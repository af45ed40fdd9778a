"""The row's schema-3 columns: why a point is slow (its bounding engine, its hot source lines),
against what (its baseline), at what cost (its compile), and its iteration timing.

A part of `kernelsweep.results.rows.Row`, like those of kernelsweep.results.row_parts, whose fields
declare its columns; each is null where the point did not get that far or the setting was off.
`speedup_vs_baseline` needs the baseline's row too, so the flow fills it once a run's rows are all in
(kernelsweep.results.pairing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelsweep.profiles.bounding import bounding_engine
from kernelsweep.results.columns import Hotspots, Int32
from kernelsweep.stage_results import CaptureResult, CompileResult, ExtractResult, TraceResult
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain.compile_cost import CompileCost


@dataclass(frozen=True, kw_only=True)
class Insight:
    bound_engine: str | None = None
    """The engine that bounds the point (`tensor`, ..., `dma`: memory-bound, or `overhead`)."""
    bound_active_percent: float | None = None
    """The bounding engine's active percent of the total time."""
    bound_why: str | None = None
    """The one-line reason for `bound_engine`."""
    baseline_ref: str | None = None
    """The block's baseline (`nkilib:module:function`), on the kernel's rows and the baseline's."""
    baseline_of: str | None = None
    """On a baseline's row: the kernel it is measured against."""
    speedup_vs_baseline: float | None = None
    """Baseline median / kernel median in the same run (> 1: the kernel is faster)."""
    hotspots: Hotspots | None = None
    """The top source lines by instruction time, from a NEFF with debug info."""
    hotspots_note: str | None = None
    """Why `hotspots` is null when it was asked for."""
    nki_source_uri: str | None = None
    """The NKI kernel's own source file in the artifact store."""
    nki_source_sha256: str | None = None
    """sha256 of the NKI kernel's source file."""
    compile_peak_rss_bytes: int | None = None
    """Peak resident memory of the compile; null on a cache hit."""
    compile_cpu_seconds: float | None = None
    """User + system CPU seconds of the trace-and-compile, children included; null on a cache hit."""
    compile_memory_limit_bytes: int | None = None
    """The memory cap the compile ran under; null when uncapped."""
    iterations: Int32 | None = None
    """Executions timed in one process of the runtime's benchmark tool."""
    iteration_latencies_us: list[float] | None = None
    """Each timed execution's device time."""
    iteration_median_us: float | None = None
    """Median of `iteration_latencies_us`."""
    iteration_p99_us: float | None = None
    """99th percentile of `iteration_latencies_us`."""
    iteration_tool: str | None = None
    """The tool that timed the iterations."""


def insight_of(
    point: Point,
    trace: TraceResult | None,
    compiled: CompileResult | None,
    captured: CaptureResult | None,
    extracted: ExtractResult | None,
) -> Insight:
    values: dict[str, Any] = {
        "baseline_ref": point.baseline or None,
        "baseline_of": point.baseline_of or None,
    }
    if trace is not None and trace.nki_source is not None:
        values |= {"nki_source_uri": trace.nki_source.uri, "nki_source_sha256": trace.nki_source.sha256}
    cost = compiled.compile_cost if compiled else trace.compile_cost if trace else None
    values |= _cost(cost)
    if captured is not None and captured.iterations is not None:
        timed = captured.iterations
        values |= {
            "iterations": len(timed.latencies_us) or None,
            "iteration_latencies_us": list(timed.latencies_us) or None,
            "iteration_median_us": timed.median_us,
            "iteration_p99_us": timed.p99_us,
            "iteration_tool": timed.tool,
        }
    if extracted is not None:
        bound = bounding_engine(extracted.metrics.values)
        if bound is not None:
            values |= {"bound_engine": bound.engine, "bound_active_percent": bound.active_percent}
            values |= {"bound_why": bound.why}
        if extracted.hotspots is not None:
            values |= {"hotspots": extracted.hotspots.as_records(), "hotspots_note": extracted.hotspots.note}
    return Insight(**values)


def _cost(cost: CompileCost | None) -> dict[str, Any]:
    if cost is None:
        return {}
    return {
        "compile_peak_rss_bytes": cost.peak_rss_bytes,
        "compile_cpu_seconds": cost.cpu_seconds,
        "compile_memory_limit_bytes": cost.memory_limit_bytes,
    }
