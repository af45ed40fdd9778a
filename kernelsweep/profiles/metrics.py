"""Turn one Neuron profile summary into one normalised metrics record.

`neuron-profile view` and `neuron-explorer view` report the same summary fields in three
containers (full JSON, summary-json, Explorer Parquet) and, depending on format and tool version,
in different units. Everything downstream (result rows, comparisons across SDK generations) needs
one shape, so every unit and naming decision lives here:

* times are seconds in every source and become microseconds under a `_us` name
  (`total_time` -> `total_time_us`); any field ending in `_time` follows the same rule;
* `*_percent` fields become 0-100; the source unit is detected per record (`_percent_unit`);
* negative values and NaN mean "unavailable" and become None, as do missing fields;
* counts and byte totals stay ints;
* unknown numeric fields go to `extra`, unknown non-numeric ones to `info`: never dropped.

Before that, each record is put in schema 7.4.0's names and time unit (kernelsweep.profiles.schema,
keyed by the profile schema's MAJOR version); after it, a profile's several entries (one per
physical core at LNC=2) are combined into the logical core's (kernelsweep.profiles.entries).
Reading the files is kernelsweep.profiles.files' job, bounded in memory and time on any input;
a file whose summary holds none of the profiler's summary fields is refused, not read as all-null.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernelsweep.errors import ExtractError
from kernelsweep.profiles import files as profile_files
from kernelsweep.profiles.entries import combine
from kernelsweep.profiles.parquet import read_parquet
from kernelsweep.profiles.schema import SUMMARY_FIELDS, SummarySchema, from_schema_fields, to_reference, unreadable

__all__ = ["FORMATS", "METRIC_FIELDS", "LatencyStats", "ProfileMetrics", "normalise_record", "read_profile"]

FORMATS = ("json", "summary-json", "parquet")

_ENGINES = ("tensor", "vector", "scalar", "sync", "gpsimd")

_KNOWN_TYPES: dict[str, type] = dict(SUMMARY_FIELDS)

# (time field, percent field) pairs whose percent is time / total_time: the redundancy that tells
# a fraction from a percent without trusting the format or tool version.
_UNIT_PAIRS: tuple[tuple[str, str], ...] = (
    *((f"{e}_engine_active_time", f"{e}_engine_active_time_percent") for e in _ENGINES),
    ("dma_active_time", "dma_active_time_percent"),
    ("total_active_time", "total_active_time_percent"),
)
# The two hypotheses differ by 100x, so a loose tolerance only absorbs rounding in the source.
_UNIT_TOLERANCE = 0.1
_DEFAULT_PERCENT_UNIT = {"summary-json": "fraction", "json": "percent", "parquet": "percent"}

_SECONDS_TO_US = 1e6


def _normalised_name(raw: str) -> str:
    """Times carry their unit in the name because the value changes from seconds to microseconds."""
    return raw + "_us" if raw.endswith("_time") else raw


METRIC_FIELDS: tuple[tuple[str, type], ...] = tuple((_normalised_name(raw), kind) for raw, kind in SUMMARY_FIELDS)
_INTEGERS = frozenset(name for name, kind in METRIC_FIELDS if kind is int)
READERS = {
    "json": profile_files.read_full_json,
    "summary-json": profile_files.read_summary_json,
    "parquet": read_parquet,
}


@dataclass(frozen=True)
class ProfileMetrics:
    """One profile's summary, normalised (see the module docstring for the rules)."""

    values: dict[str, int | float | None]
    extra: dict[str, int | float | None]
    info: dict[str, str]
    source_format: str
    percent_unit: str
    entries: int = 1  # summary entries combined into these values (one per physical core, where written)
    warnings: tuple[str, ...] = ()  # the profile's own warnings (Explorer's Warning table)
    schema: SummarySchema = field(default_factory=SummarySchema)  # the schema the fields were read with

    def as_dict(self) -> dict[str, object]:
        """A flat, JSON-able row for the result store."""
        return {
            **self.values,
            **self.extra,
            **self.info,
            "source_format": self.source_format,
            "percent_unit": self.percent_unit,
            "entries": self.entries,
        }


# ---------------------------------------------------------------------------------------------
# Normalisation rules
# ---------------------------------------------------------------------------------------------


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _available(value: object) -> int | float | None:
    """The profiler writes a negative value (or NaN) for a metric it could not compute."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or value < 0:
        return None
    return value


def _pair_verdict(record: Mapping[str, object], time_field: str, percent_field: str) -> str | None:
    """'fraction' or 'percent' if this pair pins the unit down, None if it cannot (zero/missing)."""
    total = _available(record.get("total_time"))
    part = _available(record.get(time_field))
    reported = _available(record.get(percent_field))
    if not (total and part and reported):
        return None
    ratio = part / total
    for unit, expected in (("fraction", ratio), ("percent", 100 * ratio)):
        if abs(reported - expected) <= _UNIT_TOLERANCE * expected:
            return unit
    return None


def _percent_unit(record: Mapping[str, object], source_format: str, source: str) -> str:
    """Decide what unit this record's `*_percent` fields use.

    Order of evidence: the redundant (time, percent) pairs; otherwise any percent above 1, which a
    fraction cannot be; otherwise the format default -- summary-json: fraction (what Profiler 2.0
    emits), json and parquet: percent (what the full-profile tables show).
    """
    verdicts = {v for t, p in _UNIT_PAIRS if (v := _pair_verdict(record, t, p)) is not None}
    if len(verdicts) > 1:
        raise ExtractError(f"{source}: percent fields disagree on their unit (fraction vs percent)")
    if verdicts:
        return verdicts.pop()
    percents = (_available(v) for k, v in record.items() if k.endswith("_percent"))
    if any(p is not None and p > 1 for p in percents):
        return "percent"
    return _DEFAULT_PERCENT_UNIT[source_format]


def _scaled(raw: str, value: float, percent_unit: str) -> int | float:
    """Seconds -> microseconds for times, fraction -> 0-100 for percents; others unchanged."""
    if raw.endswith("_time"):
        return value * _SECONDS_TO_US
    if raw.endswith("_percent") and percent_unit == "fraction":
        return value * 100
    return value


def _typed(value: float, kind: type) -> int | float:
    """Counts serialised as floats (Parquet doubles, `1.0e9`) are rounded back to int."""
    return round(value) if kind is int else float(value)


def _info_text(key: str, value: object) -> str:
    """Facts are kept as text; booleans (and is_simulation in any spelling) as "true"/"false"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if key == "is_simulation" and str(value).lower() in ("0", "1", "true", "false"):
        return "true" if str(value).lower() in ("1", "true") else "false"
    return str(value)


def _known_value(raw: str, value: object, percent_unit: str, source: str) -> int | float | None:
    if value is not None and not _is_number(value):
        shown = repr(value)[:60]
        raise ExtractError(f"{source}: field {raw!r} should be a number, got {shown}")
    number = _available(value)
    return None if number is None else _typed(_scaled(raw, number, percent_unit), _KNOWN_TYPES[raw])


def _unknown_value(raw: str, value: float, percent_unit: str) -> int | float | None:
    """Unknown fields follow the same time/percent/unavailable rules; ints stay ints."""
    number = _available(value)
    return None if number is None else _scaled(raw, number, percent_unit)


def _metadata_info(metadata: Mapping[str, object] | None) -> dict[str, str]:
    """The Metadata table is the authoritative home of these facts when the record repeats one."""
    return {str(k): _info_text(str(k), v) for k, v in (metadata or {}).items() if v is not None}


def _normalise(
    record: Mapping[str, object],
    source_format: str,
    metadata: Mapping[str, object] | None,
    source: str,
) -> ProfileMetrics:
    if source_format not in FORMATS:
        raise ValueError(f"unknown profile format {source_format!r}; expected one of {FORMATS}")
    unit = _percent_unit(record, source_format, source)
    values: dict[str, int | float | None] = {name: None for name, _ in METRIC_FIELDS}
    extra: dict[str, int | float | None] = {}
    info: dict[str, str] = {}
    for raw, value in record.items():
        name = _normalised_name(raw)
        if raw in _KNOWN_TYPES:
            values[name] = _known_value(raw, value, unit, source)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if name in values or name in extra:
                raise ExtractError(f"{source}: field {raw!r} collides with field {name!r}")
            extra[name] = _unknown_value(raw, value, unit)
        elif value is not None:
            info[raw] = _info_text(raw, value)
    info.update(_metadata_info(metadata))
    return ProfileMetrics(values, extra, info, source_format, unit)


def normalise_record(
    record: Mapping[str, object],
    source_format: str,
    metadata: Mapping[str, object] | None = None,
) -> ProfileMetrics:
    """Normalise one flat summary record (as the profiler wrote it) plus optional Metadata facts."""
    return _normalise(record, source_format, metadata, "profile record")


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def read_profile(
    path: str | os.PathLike[str], profile_format: str | None = None, schema: SummarySchema | None = None
) -> ProfileMetrics:
    """Read one profile (`json`, `summary-json` or `parquet`; detected when None) and normalise it.

    `schema`: what the profiler says its Summary fields are (`--show-profile-schema`), for formats
    that do not say it themselves; Parquet's own SchemaFields table wins. Raises ExtractError
    (deterministic) naming the file when it is missing, unreadable or has no usable summary.
    """
    path = Path(path)
    if profile_format is not None and profile_format not in FORMATS:
        raise ValueError(f"unknown profile format {profile_format!r}; expected one of {FORMATS}")
    if not path.exists():
        raise profile_files.fail(path, "profile not found")
    if not (path.is_file() or path.is_dir()):
        raise profile_files.fail(path, "is not a regular file (a pipe or a device?); give a profile file")
    source_format = profile_format or profile_files.detect_format(path)
    raw = READERS[source_format](path)
    schema = _schema_of(raw, schema)
    records = [to_reference(record, schema) for record in raw.records]
    if not any(record.keys() & _KNOWN_TYPES.keys() for record in records):  # a row of nulls is no measurement
        raise ExtractError(f"{path}: {unreadable(schema)}", error_class="UnreadableProfileSchema")
    entries = [_normalise(record, source_format, raw.metadata, str(path)) for record in records]
    units = {entry.percent_unit for entry in entries}
    if len(units) > 1:
        raise profile_files.fail(path, "summary entries disagree on their percent unit (fraction vs percent)")
    return ProfileMetrics(
        values=combine([e.values for e in entries], _INTEGERS),
        extra=combine([e.extra for e in entries], frozenset()),
        info=entries[0].info,
        source_format=source_format,
        percent_unit=units.pop(),
        entries=len(entries),
        warnings=raw.warnings,
        schema=schema,
    )


def _schema_of(raw: profile_files.RawProfile, given: SummarySchema | None) -> SummarySchema:
    """The profile's own schema (Parquet) before the profiler's, before the 7.4.0 reference."""
    version = (raw.metadata or {}).get("profile_schema_version")
    if raw.schema_fields:
        return from_schema_fields(raw.schema_fields, None if version is None else str(version))
    if version is not None:
        return SummarySchema(str(version), (given or SummarySchema()).units, "the profile's Metadata table")
    return given or SummarySchema()


@dataclass(frozen=True)
class LatencyStats:
    """total_time_us across a point's repeated captures: the spread tells noise from a real change."""

    repeats: int
    median_us: float
    min_us: float
    max_us: float
    p90_us: float
    p99_us: float
    latencies_us: tuple[float, ...] = ()  # every repeat, in capture order: what the verdicts test

    @classmethod
    def of(cls, latencies_us: list[float]) -> LatencyStats:
        ordered = sorted(latencies_us)
        return cls(
            latencies_us=tuple(latencies_us),
            repeats=len(ordered),
            median_us=statistics.median(ordered),
            min_us=ordered[0],
            max_us=ordered[-1],
            p90_us=_percentile(ordered, 90),
            p99_us=_percentile(ordered, 99),
        )


def _percentile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy.percentile's default)."""
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
