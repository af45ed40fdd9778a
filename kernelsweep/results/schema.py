"""The results dataset's Arrow schema (its version is `columns.SCHEMA_VERSION`): derived from `Row`,
documented column by column in docs/schema.md.

A column is declared once, as a field of `kernelsweep.results.rows.Row` (filled by one of the row's
parts, kernelsweep.results.row_parts). Its Arrow type follows from the field's Python type; the few
columns whose type is not the default (32-bit integers, artifact and hotspot records) and the ones
that may never be null are listed here. The profiler's summary fields, which `Row` carries in one
`metrics` mapping, become one column each where `metrics` stands.

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

__all__ = ["BASE_SCHEMA", "FAILED", "INCORRECT", "OK", "PARAM_PREFIX", "SCHEMA_VERSION", "arrow_fields", "schema_for"]

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
# A field's Python type (as `Row` writes it, without `| None`) -> its column's Arrow type
_BY_TYPE = {
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
# Columns whose Arrow type is not their Python type's default
_OVERRIDES = {
    **dict.fromkeys(("schema_version", "lnc", "profile_entries", "repeats", "search_trial", "iterations"), pa.int32()),
    "inputs": pa.list_(_ARTIFACT),
    "outputs": pa.list_(_ARTIFACT),
    "hotspots": pa.list_(_HOTSPOT),
}
# Columns every row has (the rest are nullable, as the evolution rule needs)
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


def arrow_fields(row_type: type) -> list[pa.Field]:
    """The Arrow columns of a row type, in its field order; a field whose type has no column type is an error."""
    columns = []
    for field in fields(row_type):
        if field.name == _METRICS:
            columns += [pa.field(name, pa.int64() if kind is int else pa.float64()) for name, kind in METRIC_FIELDS]
            continue
        python_type = str(field.type).removesuffix(" | None")
        arrow_type = _OVERRIDES.get(field.name, _BY_TYPE.get(python_type))
        if arrow_type is None:
            raise TypeError(f"{row_type.__name__}.{field.name}: {field.type} has no Arrow column type; add it here")
        columns.append(pa.field(field.name, arrow_type, nullable=field.name not in _NOT_NULL))
    return columns


BASE_SCHEMA = pa.schema(arrow_fields(Row))


def schema_for(param_axes: list[str]) -> pa.Schema:
    """The base schema plus one nullable int64 column per grid axis, in first-seen order."""
    schema = BASE_SCHEMA
    for axis in param_axes:
        schema = schema.append(pa.field(PARAM_PREFIX + axis, pa.int64()))
    return schema
