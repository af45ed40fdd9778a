"""Schema v2 of the results dataset, pinned here and documented column by column in docs/schema.md.

Evolution rule: columns are only ever added, and only as nullable. Grid parameters are the one
open-ended part: each axis a sweep uses becomes an int64 column `param_<axis>` (null for kernels
without that axis), next to the `params` map that holds them all.
"""

from __future__ import annotations

import pyarrow as pa

from kernelsweep.metrics import METRIC_FIELDS

# 2 added `latencies_us`, 3 the insight columns (results.insight), 4 `neff_compile_host`, 5 `neff_debug_info`
# and `alloc_fallback`; older rows read them as null
SCHEMA_VERSION = 5
PARAM_PREFIX = "param_"
OK, FAILED, INCORRECT = "ok", "failed", "incorrect"  # a row's status: docs/schema.md

_ARTIFACT = pa.struct(
    [("name", pa.string()), ("uri", pa.string()), ("sha256", pa.string()), ("size_bytes", pa.int64())]
)
_TIMESTAMP = pa.timestamp("us", tz="UTC")


def _artifact_columns(name: str) -> list[pa.Field]:
    return [pa.field(f"{name}_uri", pa.string()), pa.field(f"{name}_sha256", pa.string())]


_IDENTITY = [
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("row_id", pa.string(), nullable=False),
    pa.field("sweep", pa.string(), nullable=False),
    pa.field("kernel", pa.string(), nullable=False),
    pa.field("kernel_ref", pa.string()),
    pa.field("shape", pa.string(), nullable=False),
    pa.field("params", pa.map_(pa.string(), pa.int64())),
    pa.field("dtype", pa.string(), nullable=False),
    pa.field("platform", pa.string(), nullable=False),
    pa.field("lnc", pa.int32()),
    pa.field("seed", pa.int64()),
    pa.field("toolchain", pa.string(), nullable=False),
    pa.field("is_simulation", pa.bool_(), nullable=False),
]
_STATUS = [
    pa.field("status", pa.string(), nullable=False),
    pa.field("error_stage", pa.string()),
    pa.field("error_class", pa.string()),
    pa.field("error_message", pa.string()),
]
_METRICS = [pa.field(name, pa.int64() if kind is int else pa.float64()) for name, kind in METRIC_FIELDS] + [
    pa.field("extra_metrics", pa.map_(pa.string(), pa.float64())),
    pa.field("profile_format", pa.string()),
    pa.field("profile_percent_unit", pa.string()),
    pa.field("profile_schema_version", pa.string()),
    pa.field("profile_entries", pa.int32()),
    pa.field("dge_notifs", pa.bool_()),
    pa.field("dma_unreliable", pa.bool_()),
]
_DERIVED = [
    pa.field("cost_flops", pa.int64()),
    pa.field("cost_hbm_bytes", pa.int64()),
    pa.field("achieved_tflops", pa.float64()),
    pa.field("mfu_percent", pa.float64()),
    pa.field("hw_mfu_percent", pa.float64()),
    pa.field("roofline_us", pa.float64()),
    pa.field("roofline_percent", pa.float64()),
    pa.field("roofline_bound", pa.string()),
    pa.field("repeats", pa.int32()),
    pa.field("latency_median_us", pa.float64()),
    pa.field("latency_min_us", pa.float64()),
    pa.field("latency_max_us", pa.float64()),
    pa.field("latency_p90_us", pa.float64()),
    pa.field("latency_p99_us", pa.float64()),
    pa.field("latencies_us", pa.list_(pa.float64())),
]
_CORRECTNESS = [
    pa.field("max_abs_error", pa.float64()),
    pa.field("max_rel_error", pa.float64()),
    pa.field("atol", pa.float64()),
    pa.field("rtol", pa.float64()),
    pa.field("correct", pa.bool_()),
    pa.field("correctness_source", pa.string()),
    pa.field("timing_source", pa.string()),
]
_LINEAGE = [
    *_artifact_columns("kernel_source"),
    *_artifact_columns("ir"),
    *_artifact_columns("neff"),
    pa.field("inputs", pa.list_(_ARTIFACT)),
    *_artifact_columns("ntff"),
    *_artifact_columns("profile"),
    pa.field("outputs", pa.list_(_ARTIFACT)),
    pa.field("tracer", pa.string()),
    pa.field("compiler_version", pa.string()),
    pa.field("runtime_version", pa.string()),
    pa.field("profiler_version", pa.string()),
    pa.field("profiler_tool", pa.string()),
    pa.field("nki_version", pa.string()),
    pa.field("instance_type", pa.string()),
    pa.field("host", pa.string()),
    pa.field("visible_cores", pa.string()),
    pa.field("flow_run_id", pa.string()),
    pa.field("task_run_ids", pa.map_(pa.string(), pa.string())),
    pa.field("started_at", _TIMESTAMP),
    pa.field("finished_at", _TIMESTAMP),
    pa.field("trace_seconds", pa.float64()),
    pa.field("compile_seconds", pa.float64()),
    pa.field("capture_seconds", pa.float64()),
    pa.field("trace_cache_hit", pa.bool_()),
    pa.field("compile_cache_hit", pa.bool_()),
    pa.field("compile_options", pa.string()),
    pa.field("nki_compiler_frontend", pa.string()),
]

# What sets a point apart beside its shape (issue 24): its tunables, the named toolchain it ran under,
# and, for a point a search proposed, the trial. Null for points without them (and in older rows).
_VARIANT = [
    pa.field("tunables", pa.string()),
    pa.field("toolchain_name", pa.string()),
    pa.field("search_trial", pa.int32()),
]

_HOTSPOT = pa.struct(
    [
        ("file", pa.string()),
        ("line", pa.int64()),
        ("engine", pa.string()),
        ("instructions", pa.int64()),
        ("time_us", pa.float64()),
        ("share_percent", pa.float64()),
    ]
)
# Schema 3 (issue 25): why a point is slow, against what, and at what cost.
_INSIGHT = [
    pa.field("bound_engine", pa.string()),
    pa.field("bound_active_percent", pa.float64()),
    pa.field("bound_why", pa.string()),
    pa.field("baseline_ref", pa.string()),
    pa.field("baseline_of", pa.string()),
    pa.field("speedup_vs_baseline", pa.float64()),
    pa.field("hotspots", pa.list_(_HOTSPOT)),
    pa.field("hotspots_note", pa.string()),
    *_artifact_columns("nki_source"),
    pa.field("compile_peak_rss_bytes", pa.int64()),
    pa.field("compile_cpu_seconds", pa.float64()),
    pa.field("compile_memory_limit_bytes", pa.int64()),
    pa.field("iterations", pa.int32()),
    pa.field("iteration_latencies_us", pa.list_(pa.float64())),
    pa.field("iteration_median_us", pa.float64()),
    pa.field("iteration_p99_us", pa.float64()),
    pa.field("iteration_tool", pa.string()),
]

# Schema 4 (issue 23): which host compiled the point's NEFF (a compile-farm host, when it came from the store).
# Schema 5 (issue 33): what shaped the NEFF: debug info compiled in, and an allocator fallback.
_PROVENANCE = [
    pa.field("neff_compile_host", pa.string()),
    pa.field("neff_debug_info", pa.bool_()),
    pa.field("alloc_fallback", pa.bool_()),
]

BASE_SCHEMA = pa.schema(
    _IDENTITY + _STATUS + _METRICS + _DERIVED + _CORRECTNESS + _LINEAGE + _VARIANT + _INSIGHT + _PROVENANCE
)


def schema_for(param_axes: list[str]) -> pa.Schema:
    """The base schema plus one nullable int64 column per grid axis, in first-seen order."""
    schema = BASE_SCHEMA
    for axis in param_axes:
        schema = schema.append(pa.field(PARAM_PREFIX + axis, pa.int64()))
    return schema
