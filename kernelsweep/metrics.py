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

Reading the files is kernelsweep.profile_files' job, bounded in memory and time on any input;
a file whose summary holds none of the profiler's summary fields is refused, not read as all-null.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelsweep import profile_files
from kernelsweep.errors import ExtractError

__all__ = ["FORMATS", "METRIC_FIELDS", "LatencyStats", "ProfileMetrics", "normalise_record", "read_profile"]

FORMATS = ("json", "summary-json", "parquet")

_ENGINES = ("tensor", "vector", "scalar", "sync", "gpsimd")


def _engine_fields(engine: str) -> tuple[tuple[str, type], ...]:
    prefix = f"{engine}_engine_"
    return (
        (prefix + "instruction_time", float),
        (prefix + "active_time", float),
        (prefix + "active_time_percent", float),
        (prefix + "instruction_count", int),
    )


# Profiler summary field names as the profiler spells them (Explorer schema 7.4.0), in its order.
_SUMMARY_FIELDS: tuple[tuple[str, type], ...] = (
    ("total_time", float),
    ("neuroncore_cycle_count", int),
    ("model_flops", int),
    ("hardware_flops", int),
    ("transpose_flops", int),
    ("adjusted_hardware_flops", int),
    ("adjusted_transpose_flops", int),
    ("mm_arithmetic_intensity", float),
    ("peak_flops_bandwidth_ratio", float),
    ("trace_count", int),
    ("event_count", int),
    ("dma_active_time", float),
    ("dma_active_time_percent", float),
    ("dma_transfer_total_bytes", int),
    ("dma_transfer_count", int),
    ("inputs_outputs_weights_size_bytes", int),
    ("weight_size_bytes", int),
    ("mbu_estimated_percent", float),
    ("hbm_write_bytes", int),
    ("hbm_read_bytes", int),
    ("sbuf_write_bytes", int),
    ("sbuf_read_bytes", int),
    ("spill_save_bytes", int),
    ("spill_reload_bytes", int),
    ("psum_write_bytes", int),
    ("psum_read_bytes", int),
    *_engine_fields("tensor"),
    ("matmul_instruction_count", int),
    ("mfu_estimated_percent", float),
    ("mfu_max_achievable_estimated_percent", float),
    ("hfu_estimated_percent", float),
    *(field for engine in _ENGINES[1:] for field in _engine_fields(engine)),
    ("cc_op_time", float),
    ("total_exec_time", float),
    ("total_active_time", float),
    ("total_active_time_percent", float),
)

_KNOWN_TYPES: dict[str, type] = dict(_SUMMARY_FIELDS)

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


METRIC_FIELDS: tuple[tuple[str, type], ...] = tuple((_normalised_name(raw), kind) for raw, kind in _SUMMARY_FIELDS)


@dataclass(frozen=True)
class ProfileMetrics:
    """One profile's summary, normalised (see the module docstring for the rules)."""

    values: dict[str, int | float | None]
    extra: dict[str, int | float | None]
    info: dict[str, str]
    source_format: str
    percent_unit: str

    def as_dict(self) -> dict[str, object]:
        """A flat, JSON-able row for the result store."""
        return {
            **self.values,
            **self.extra,
            **self.info,
            "source_format": self.source_format,
            "percent_unit": self.percent_unit,
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


def read_profile(path: str | os.PathLike[str], profile_format: str | None = None) -> ProfileMetrics:
    """Read one profile (`json`, `summary-json` or `parquet`; detected when None) and normalise it.

    Raises ExtractError (deterministic) naming the file when it is missing, unreadable or has no
    usable summary.
    """
    path = Path(path)
    if profile_format is not None and profile_format not in FORMATS:
        raise ValueError(f"unknown profile format {profile_format!r}; expected one of {FORMATS}")
    if not path.exists():
        raise profile_files.fail(path, "profile not found")
    if not (path.is_file() or path.is_dir()):
        raise profile_files.fail(path, "is not a regular file (a pipe or a device?); give a profile file")
    source_format = profile_format or profile_files.detect_format(path)
    record, metadata = profile_files.READERS[source_format](path)
    if not record.keys() & _KNOWN_TYPES.keys():
        names = ", ".join(list(_KNOWN_TYPES)[:3])
        raise profile_files.fail(path, f"has none of the profile summary fields ({names}, ...): not a Neuron profile")
    return _normalise(record, source_format, metadata, str(path))


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
