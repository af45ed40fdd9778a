"""What every result row states about itself: the schema version it was written under, its status
values, the prefix of its per-axis columns, and the column types a declaration names beyond Python's
own (`Int32`, `Artifacts`, `Hotspots`: kernelsweep.results.schema maps each to its Arrow type). Below
the row, its parts and the schema, which all use them."""

from __future__ import annotations

from typing import Any, TypeAlias

# 2 added `latencies_us`, 3 the insight columns (results.insight), 4 `neff_compile_host`, 5 `neff_debug_info`
# and `alloc_fallback`, 6 `hostname` (`host` became the fleet host's name), 7 `dropped_reason`; older rows
# read them as null
SCHEMA_VERSION = 7
PARAM_PREFIX = "param_"
OK, FAILED, INCORRECT = "ok", "failed", "incorrect"  # a row's status: docs/schema.md
CONFIRMATION = "confirmation"  # repeats `compare --confirm` captured again: not a run of the point

# A column's annotation says its Arrow type: these three name the types Python's own do not
Int32: TypeAlias = int  # an int32 column (counts that never need 64 bits)
Artifacts: TypeAlias = list[dict[str, Any]]  # list<struct<name, uri, sha256, size_bytes>>: stored files
Hotspots: TypeAlias = list[dict[str, Any]]  # list<struct<file, line, engine, ...>>: hot source lines
