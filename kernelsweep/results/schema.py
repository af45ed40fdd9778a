"""The results dataset's Arrow schema (its version is `columns.SCHEMA_VERSION`): derived from `Row`'s
column declarations, documented column by column in docs/schema.md.

A column is declared once, as a field of the row part that fills it (kernelsweep.results.row_parts,
.row_identity, .lineage, .insight; `Row` is their union). Its Arrow type follows from the field's
annotation (`columns.Int32`, `Artifacts` and `Hotspots` name the types Python's own do not). Listed
here: where each column stands (`COLUMN_ORDER`, the released order that Parquet readers see) and the
columns that may never be null. The profiler's summary fields, which `Row` carries in one `metrics`
mapping, become one column each where `metrics` stands.

Evolution rule: columns are only ever added, and only as nullable. Grid parameters are the one
open-ended part: each axis a sweep uses becomes an int64 column `param_<axis>` (null for kernels
without that axis), next to the `params` map that holds them all.
"""

from __future__ import annotations

from dataclasses import fields

import pyarrow as pa

from kernelsweep.profiles.metrics import METRIC_FIELDS
from kernelsweep.results.columns import FAILED, INCORRECT, OK, PARAM_PREFIX, SCHEMA_VERSION
from kernelsweep.results.rows import Row

__all__ = [
    "BASE_SCHEMA",
    "COLUMN_ORDER",
    "FAILED",
    "INCORRECT",
    "OK",
    "PARAM_PREFIX",
    "SCHEMA_VERSION",
    "arrow_fields",
    "schema_for",
]

_ARTIFACT = pa.struct(
    [("name", pa.string()), ("uri", pa.string()), ("sha256", pa.string()), ("size_bytes", pa.int64())]
)
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
# A field's annotation (as its part writes it, without `| None`) -> its column's Arrow type
_BY_TYPE = {
    "Int32": pa.int32(),
    "Artifacts": pa.list_(_ARTIFACT),
    "Hotspots": pa.list_(_HOTSPOT),
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "datetime": pa.timestamp("us", tz="UTC"),
    "list[float]": pa.list_(pa.float64()),
    "dict[str, int]": pa.map_(pa.string(), pa.int64()),
    "dict[str, float]": pa.map_(pa.string(), pa.float64()),
    "dict[str, str]": pa.map_(pa.string(), pa.string()),
}

# The dataset's column order as released: a new column goes at the end, since readers of older files (and
# Athena's table, deployments/athena.sql) take columns by position
COLUMN_ORDER = (
    "schema_version", "row_id", "sweep", "kernel", "kernel_ref", "shape", "params", "dtype", "platform", "lnc",
    "seed", "toolchain", "is_simulation", "status", "error_stage", "error_class", "error_message", "metrics",
    "extra_metrics", "profile_format", "profile_percent_unit", "profile_schema_version", "profile_entries",
    "dge_notifs", "dma_unreliable", "cost_flops", "cost_hbm_bytes", "achieved_tflops", "mfu_percent",
    "hw_mfu_percent", "roofline_us", "roofline_percent", "roofline_bound", "repeats", "latency_median_us",
    "latency_min_us", "latency_max_us", "latency_p90_us", "latency_p99_us", "latencies_us", "max_abs_error",
    "max_rel_error", "atol", "rtol", "correct", "correctness_source", "timing_source", "kernel_source_uri",
    "kernel_source_sha256", "ir_uri", "ir_sha256", "neff_uri", "neff_sha256", "inputs", "ntff_uri", "ntff_sha256",
    "profile_uri", "profile_sha256", "outputs", "tracer", "compiler_version", "runtime_version", "profiler_version",
    "profiler_tool", "nki_version", "instance_type", "host", "visible_cores", "flow_run_id", "task_run_ids",
    "started_at", "finished_at", "trace_seconds", "compile_seconds", "capture_seconds", "trace_cache_hit",
    "compile_cache_hit", "compile_options", "nki_compiler_frontend", "tunables", "toolchain_name", "search_trial",
    "bound_engine", "bound_active_percent", "bound_why", "baseline_ref", "baseline_of", "speedup_vs_baseline",
    "hotspots", "hotspots_note", "nki_source_uri", "nki_source_sha256", "compile_peak_rss_bytes",
    "compile_cpu_seconds", "compile_memory_limit_bytes", "iterations", "iteration_latencies_us",
    "iteration_median_us", "iteration_p99_us", "iteration_tool",
    "neff_compile_host",  # 4
    "neff_debug_info", "alloc_fallback",  # 5
    "hostname",  # 6
    "dropped_reason",  # 7
)  # fmt: skip
# Columns every row has had since the first schema (the rest are nullable, as the evolution rule needs)
_NOT_NULL = frozenset(
    (
        "schema_version",
        "row_id",
        "sweep",
        "kernel",
        "shape",
        "dtype",
        "platform",
        "toolchain",
        "is_simulation",
        "status",
    )
)
_METRICS = "metrics"  # the Row field holding the profiler's summary fields, one column each


def arrow_fields(row_type: type, order: tuple[str, ...] | None = None) -> list[pa.Field]:
    """The Arrow columns of a row type, in `order` (default: its field order); a field whose annotation has
    no column type, or that the order leaves out or names twice, is an error naming it."""
    declared = {field.name: field for field in fields(row_type)}
    names = list(declared) if order is None else list(order)
    if sorted(names) != sorted(declared):
        unplaced, unknown = sorted(set(declared) - set(names)), sorted(set(names) - set(declared))
        twice = sorted({name for name in names if names.count(name) > 1})
        raise TypeError(f"{row_type.__name__}: columns without a place {unplaced}, unknown {unknown}, twice {twice}")
    columns = []
    for name in names:
        if name == _METRICS:
            columns += [pa.field(metric, pa.int64() if kind is int else pa.float64()) for metric, kind in METRIC_FIELDS]
            continue
        annotation = str(declared[name].type).removesuffix(" | None")
        arrow_type = _BY_TYPE.get(annotation)
        if arrow_type is None:
            raise TypeError(f"{row_type.__name__}.{name}: {declared[name].type} has no Arrow column type; add it here")
        columns.append(pa.field(name, arrow_type, nullable=name not in _NOT_NULL))
    return columns


BASE_SCHEMA = pa.schema(arrow_fields(Row, COLUMN_ORDER))


def schema_for(param_axes: list[str]) -> pa.Schema:
    """The base schema plus one nullable int64 column per grid axis, in first-seen order."""
    schema = BASE_SCHEMA
    for axis in param_axes:
        schema = schema.append(pa.field(PARAM_PREFIX + axis, pa.int64()))
    return schema
