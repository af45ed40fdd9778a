"""What changes between Neuron Explorer releases, asked of the installed tool rather than assumed.

* The profile schema (kernelsweep.profiles.schema): `neuron-explorer view --show-profile-schema` on
  schema 12.x (SDK 2.33), `neuron-explorer --show-profile-schema` on 7.x (SDK 2.31); the reference
  page of each version names its command. neuron-profile has none.
* Full-profile JSON: "Neuron Release 2.33.0 is the last release to support the Neuron Explorer
  full-profile JSON output" (announce-intent-eos-explorer-json), so from 2.34 a spec asking for
  `json` is read from Parquet, the full-profile format that replaces it, and the row says `parquet`.
"""

from __future__ import annotations

import threading

from kernelsweep.profiles.schema import SummarySchema, from_printout
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain

LAST_FULL_JSON = (2, 33)
SCHEMA_COMMANDS = (["view", "--show-profile-schema"], ["--show-profile-schema"])  # 12.x first, then 7.x
_schemas: dict[tuple[str, ...], SummarySchema | None] = {}
_lock = threading.Lock()


def _release(version: str | None) -> tuple[int, int] | None:
    parts = (version or "").split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def view_format(requested: str, profiler_tool: str | None, profiler_version: str | None) -> str:
    """The view format to run for a spec's `profile_format` (auto: summary-json, both tools' format)."""
    if requested == "auto":
        return "summary-json"
    release = _release(profiler_version)
    if requested == "json" and profiler_tool == "neuron-explorer" and release and release > LAST_FULL_JSON:
        return "parquet"
    return requested


def summary_schema(toolchain: Toolchain) -> SummarySchema | None:
    """The installed Explorer's Summary schema (`ask_schema`), asked once per process and profiler: the
    pool's first extractions all want it at once, and the others wait for the one asking rather than
    each start the tool and parse its printout again."""
    key = (*toolchain.command(toolchain.profiler), *sorted(f"{k}={v}" for k, v in toolchain.env.items()))
    with _lock:
        if key not in _schemas:
            _schemas[key] = ask_schema(toolchain)
        return _schemas[key]


def ask_schema(toolchain: Toolchain, timeout_seconds: float = 60) -> SummarySchema | None:
    """Explorer's Summary schema (version and units) from its printout: under `view` first, then at
    the top level. None for neuron-profile, or when neither command prints a schema."""
    if toolchain.profiler != "neuron-explorer" or toolchain.profiler not in toolchain.commands:
        return None
    for command in SCHEMA_COMMANDS:
        argv = toolchain.command(toolchain.profiler) + command
        result = run_tool(argv, env=toolchain.env, timeout_seconds=timeout_seconds)
        found = from_printout(result.stdout) if result.returncode == 0 and not result.timed_out else None
        if found is not None:
            return found
    return None
