"""The profiler's Summary field names and units, by profile schema version.

Neuron Explorer versions its profile schema MAJOR.MINOR.PATCH, where a MAJOR bump renames or removes
a field or changes its type (SDK `tools/neuron-explorer/profile-schema-reference.rst`). kernelsweep's
named columns are the 7.4.0 Summary fields (SDK 2.31); SDK 2.33 ships schema 12.0.1. So every record
is read through the map for its schema's MAJOR version (`FIELD_NAMES`: that schema's name for each
named field) and through the units its schema states, into 7.4.0's names and units, before
kernelsweep.profiles.metrics normalises it.

Where the schema comes from, best first: the profile's own (Explorer Parquet carries
`profile_schema_version` in its Metadata table and every field's unit in its SchemaFields table), the
profiler's (`neuron-explorer view --show-profile-schema` on 12.x, `neuron-explorer
--show-profile-schema` on 7.x: the same OpenAPI definition as YAML), else the 7.4.0 reference.

12.0.1's field table could not be read from here (only the page's opening is reachable), so its map
holds 7.4.0's names until a 2.33 host's `doctor --smoke` (step "profile schema") shows otherwise;
units are never assumed, they are read from the schema itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_ENGINES = ("tensor", "vector", "scalar", "sync", "gpsimd")


def _engine_fields(engine: str) -> tuple[tuple[str, type], ...]:
    prefix = f"{engine}_engine_"
    return (
        (prefix + "instruction_time", float),
        (prefix + "active_time", float),
        (prefix + "active_time_percent", float),
        (prefix + "instruction_count", int),
    )


# The named Summary fields as schema 7.4.0 spells them, in its order: kernelsweep's canonical names.
SUMMARY_FIELDS: tuple[tuple[str, type], ...] = (
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
    *(f for engine in _ENGINES[1:] for f in _engine_fields(engine)),
    ("cc_op_time", float),
    ("total_exec_time", float),
    ("total_active_time", float),
    ("total_active_time_percent", float),
)
REFERENCE_VERSION = "7.4.0"

# Per schema MAJOR: {canonical (7.4.0) name: that schema's name}, for the fields whose name differs.
FIELD_NAMES: dict[int, dict[str, str]] = {
    7: {},
    12: {},  # 12.0.1 (SDK 2.33): no rename published where it could be read; see the module docstring
}

_SECONDS_PER = {"seconds": 1.0, "s": 1.0, "milliseconds": 1e-3, "ms": 1e-3, "microseconds": 1e-6, "us": 1e-6,
                "nanoseconds": 1e-9, "ns": 1e-9}  # fmt: skip


@dataclass(frozen=True)
class SummarySchema:
    """What one schema says about the Summary table: its version and each field's unit."""

    version: str | None = None
    units: dict[str, str] = field(default_factory=dict)  # field name as this schema spells it -> unit
    source: str = f"the {REFERENCE_VERSION} reference"

    @property
    def major(self) -> int | None:
        head = (self.version or "").split(".")[0]
        return int(head) if head.isdigit() else None

    def names(self) -> dict[str, str]:
        """{this schema's name: canonical name} for the renamed fields. An unknown major (newer than
        kernelsweep) is read with the newest map kernelsweep has, an absent version with 7.4.0's."""
        majors = sorted(FIELD_NAMES)
        major = self.major if self.major is not None else majors[0]
        chosen = FIELD_NAMES.get(major, FIELD_NAMES[majors[-1]])
        return {source: canonical for canonical, source in chosen.items()}

    def missing(self) -> list[str]:
        """Canonical fields this schema does not name (empty when it names no fields at all)."""
        if not self.units:
            return []
        renamed = {canonical: source for source, canonical in self.names().items()}
        return [name for name, _ in SUMMARY_FIELDS if renamed.get(name, name) not in self.units]


def unreadable(schema: SummarySchema) -> str:
    """Why a profile with none of the named fields fails its point: the schema it was read as, the
    majors kernelsweep can read, and how to get this schema's names (never a row of nulls)."""
    names = ", ".join(name for name, _ in SUMMARY_FIELDS[:3])
    return (
        f"has none of the profile summary fields ({names}, ...) read as profile schema "
        f"{schema.version or 'of unknown version'} ({schema.source}); kernelsweep maps schema majors "
        f"{', '.join(map(str, sorted(FIELD_NAMES)))}: if this is a Neuron profile, run `kernelsweep doctor "
        "--smoke` here, whose profile-schema step lists this schema's fields, and report them"
    )


def to_reference(record: Mapping[str, object], schema: SummarySchema) -> dict[str, object]:
    """One record in 7.4.0's names and time unit: renamed fields get their canonical names back, and a
    time the schema states in another unit (nanoseconds, say) is converted to seconds."""
    names = schema.names()
    out: dict[str, object] = {}
    for key, value in record.items():
        name = names.get(key, key)
        unit = schema.units.get(key)
        if name.endswith("_time") and unit in _SECONDS_PER and _is_number(value):
            value = value * _SECONDS_PER[unit]  # type: ignore[operator]
        out[name] = value
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def from_schema_fields(rows: Iterable[Mapping[str, Any]], version: str | None) -> SummarySchema:
    """Explorer's SchemaFields table (one row per table and field, with its unit)."""
    units: dict[str, str] = {}
    for row in rows:
        table = _first(row, ("table", "table_name"))
        name = _first(row, ("field", "field_name", "name"))
        if table == "Summary" and name:
            units[str(name)] = str(_first(row, ("unit",)) or "")
    return SummarySchema(version, units, "the profile's SchemaFields table")


def from_printout(text: str) -> SummarySchema | None:
    """`--show-profile-schema`: OpenAPI as YAML, one block per table. None when it holds no Summary."""
    import yaml  # deferred: only this fallback parses YAML

    try:
        documents = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError:
        return None
    summary = next((found for d in documents if (found := _find_table(d, "Summary")) is not None), None)
    if summary is None:
        return None
    units = {
        str(name): str(_first(spec, ("x-unit", "unit", "x-units")) or "") if isinstance(spec, dict) else ""
        for name, spec in summary.items()
    }
    version = next((v for d in documents if (v := _version(d))), None)
    return SummarySchema(version, units, "`--show-profile-schema`")


def _find_table(node: Any, table: str, depth: int = 0) -> dict[str, Any] | None:
    """The `properties` of the object schema named `table`, wherever the document nests it."""
    if not isinstance(node, dict) or depth > 8:
        return None
    spec = node.get(table)
    if isinstance(spec, dict) and isinstance(spec.get("properties"), dict):
        return spec["properties"]
    for child in node.values():
        found = _find_table(child, table, depth + 1)
        if found is not None:
            return found
    return None


def _version(document: Mapping[str, Any]) -> str | None:
    info = document.get("info")
    value = info.get("version") if isinstance(info, dict) else document.get("version")
    return str(value) if value is not None else None


def _first(row: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((row[k] for k in keys if row.get(k) not in (None, "")), None)
