"""Stand-in generations of the Neuron tools (aws-neuronx-tools): what `neuron-explorer` and
`neuron-ls` print, release by release, chosen with KERNELSWEEP_SIM_TOOLS (default 2.31).

  2.31  profile schema 7.4.0 (the reference every named column follows), `neuron-explorer
        --show-profile-schema`, full-profile JSON, `neuron-ls -j`
  2.33  profile schema 12.0.1 and `neuron-explorer view --show-profile-schema` (both from the 2.33
        schema reference page); aws-neuronx-tools 2.33.38.0 (2.33.0 release content); full JSON's
        last release; `neuron-ls -j` still there
  2.34  as 2.33, minus full-profile JSON and `neuron-ls -j`, which 2.34 removes; `neuron-ls
        --output-format json` instead, whose new top-level fields are announced, not yet published
  renamed  no release: 2.34 with a profile schema 99.0.0 that renames every Summary field (camelCase),
        the case of a MAJOR bump kernelsweep has no field map for, which must fail points loudly

What 12.0.1 renames could not be read here (see kernelsweep.profiles.schema). The 12.0.1 stand-in
therefore carries one change of the kind a MAJOR version allows, a HYPOTHESIS to exercise the path,
not a fact: every Summary time is an integer count of nanoseconds (the unit 7.4.0's own timeline
tables already use), and its schema printout and SchemaFields table say so. kernelsweep reads units
from the schema, so a real 12.x is read the same way whatever it changed units to.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelsweep.sim import PROFILER_VERSION, SIM_VERSION_SUFFIX

TOOLS_ENV = "KERNELSWEEP_SIM_TOOLS"


@dataclass(frozen=True)
class ToolsRelease:
    name: str
    profiler_version: str
    schema_version: str
    time_unit: str  # of the Summary's `*_time` fields
    schema_under_view: bool  # `view --show-profile-schema` (12.x) rather than `--show-profile-schema`
    full_json: bool  # `view --output-format json`
    neuron_ls_j: bool  # `neuron-ls -j`; without it, `--output-format json`
    renamed: bool = False  # every Summary field renamed (camelCase): a schema kernelsweep has no map for

    @property
    def time_scale(self) -> float:
        """Seconds -> this release's time unit."""
        return {"seconds": 1.0, "nanoseconds": 1e9}[self.time_unit]


RELEASES = {
    "2.31": ToolsRelease("2.31", PROFILER_VERSION, "7.4.0", "seconds", False, True, True),
    "2.33": ToolsRelease("2.33", "2.33.38.0" + SIM_VERSION_SUFFIX, "12.0.1", "nanoseconds", True, True, True),
    "2.34": ToolsRelease("2.34", "2.34.0.0" + SIM_VERSION_SUFFIX, "12.0.1", "nanoseconds", True, False, False),
    "renamed": ToolsRelease("renamed", "2.99.0.0" + SIM_VERSION_SUFFIX, "99.0.0", "nanoseconds", True, False, False,
                            renamed=True),
}  # fmt: skip
DEFAULT_RELEASE = "2.31"


def release(name: str | None) -> ToolsRelease:
    """The configured release; a bad name is a ValueError naming the variable (one line at the CLI)."""
    chosen = name or DEFAULT_RELEASE
    if chosen not in RELEASES:
        raise ValueError(f"{TOOLS_ENV}={chosen!r}: use one of {', '.join(RELEASES)}")
    return RELEASES[chosen]
