"""Which SDK each host of a fleet runs, whether a run may use it, and where a family disagrees.

A night's rows are only comparable if every host of a family compiled and profiled with the same
SDK: a fleet that upgrades one host at a time silently mixes compilers inside one night, and
`compare --versions` can only tell afterwards. So every shard reports its host's versions when it
starts (as labels on its flow run, where the fleet flow and the UI read them), a run may pin the
versions it needs (`require` in the spec or the run form; a host that does not match refuses the
run's points before measuring any), and the fleet's summary flags a family whose hosts differ.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kernelsweep.sweepspec.models import Requirements, SweepSpec

LABEL_PREFIX = "kernelsweep."
VERSION_NAMES = ("compiler", "runtime", "nki", "profiler")  # what a row records and a run may pin


@dataclass(frozen=True)
class HostReport:
    """What one host said when it started a shard."""

    host: str  # the worker's name (the machine's name where no worker started it)
    family: str | None  # None: a simulator emulating every family
    versions: Mapping[str, str | None]  # by VERSION_NAMES
    toolchain: str | None = None  # neuron, cpu or sim

    def labels(self) -> dict[str, bool | int | float | str]:
        """As flow run labels: `kernelsweep.host`, `kernelsweep.family`, `kernelsweep.compiler`, ..."""
        found = {"host": self.host, "family": self.family or "any", "toolchain": self.toolchain, **self.versions}
        return {f"{LABEL_PREFIX}{name}": value or "-" for name, value in found.items()}

    @classmethod
    def from_labels(cls, labels: Mapping[str, object]) -> HostReport | None:
        """The report a shard left on its flow run; None for a shard that never started."""
        host = labels.get(f"{LABEL_PREFIX}host")
        if not isinstance(host, str):
            return None

        def value(name: str) -> str | None:
            found = labels.get(f"{LABEL_PREFIX}{name}")
            return str(found) if found not in (None, "-", "any") else None

        return cls(host, value("family"), {name: value(name) for name in VERSION_NAMES}, value("toolchain"))

    def line(self) -> str:
        versions = ", ".join(f"{name} {self.versions.get(name) or '-'}" for name in VERSION_NAMES)
        return f"host {self.host} ({self.family or 'every family'}, toolchain {self.toolchain or '-'}): {versions}"


def attempt_label(attempt: int) -> str:
    """The label naming the host of a shard's `attempt` (1, 2, ...): `kernelsweep.host` names only the last."""
    return f"{LABEL_PREFIX}attempt.{attempt}"


def attempt_hosts(labels: Mapping[str, object]) -> list[str]:
    """The hosts that started a shard, attempt by attempt (each attempt's label; a gap is "?")."""
    prefix = attempt_label(0)[:-1]
    found = {
        int(k[len(prefix) :]): str(v) for k, v in labels.items() if k.startswith(prefix) and k[len(prefix) :].isdigit()
    }
    return [found.get(n, "?") for n in range(1, max(found, default=0) + 1)]


def unmet(require: Requirements, versions: Mapping[str, str | None]) -> list[str]:
    """Each pinned version this host does not have, as `compiler 2.22.1 (the run requires 2.21.*)`."""
    problems = []
    for name, pattern in require.pins().items():
        have = versions.get(name)
        if have is None or not fnmatch.fnmatchcase(have, pattern):
            problems.append(f"{name} {have or 'unknown'} (the run requires {pattern})")
    return problems


def disagreements(reports: Iterable[HostReport]) -> dict[str, dict[str, dict[str, list[str]]]]:
    """family -> version name -> version -> its hosts, for each version on which a family's hosts differ."""
    seen: dict[str, dict[str, dict[str, set[str]]]] = {}
    for report in reports:
        family = report.family or "any"
        for name in VERSION_NAMES:
            version = report.versions.get(name) or "unknown"
            seen.setdefault(family, {}).setdefault(name, {}).setdefault(version, set()).add(report.host)
    found: dict[str, dict[str, dict[str, list[str]]]] = {}
    for family, names in seen.items():
        differing = {name: by_version for name, by_version in names.items() if len(by_version) > 1}
        if differing:
            found[family] = {n: {v: sorted(h) for v, h in by_version.items()} for n, by_version in differing.items()}
    return found


def unrunnable(spec: SweepSpec, reports: Iterable[HostReport]) -> str | None:
    """Why no host that has reported could run the spec's points of some family, if none could: its
    hosts all run the simulator and the spec asks for the real toolchain, or none has the pinned
    versions. A family no host has reported for yet is not judged."""
    by_family: dict[str, list[HostReport]] = {}
    for report in reports:
        by_family.setdefault(report.family or "any", []).append(report)
    for family in spec.platforms:
        hosts = by_family.get(family, []) + by_family.get("any", [])
        if not hosts:
            continue
        if spec.toolchain == "neuron" and all(h.toolchain == "sim" for h in hosts):
            names = ", ".join(sorted(h.host for h in hosts))
            return f"toolchain neuron, but every {family} host ran the simulator ({names})"
        if all(unmet(spec.require, h.versions) for h in hosts):
            seen = "; ".join(f"{h.host}: {', '.join(unmet(spec.require, h.versions))}" for h in hosts)
            return f"no {family} host has the versions `require` pins ({seen})"
    return None


def describe(found: Mapping[str, Mapping[str, Mapping[str, list[str]]]]) -> list[str]:
    """One line per family whose hosts disagree: `trn2 hosts differ: compiler 2.21 (trn2-a), 2.22 (trn2-b)`."""
    lines = []
    for family, names in found.items():
        parts = [
            f"{name} " + ", ".join(f"{version} ({', '.join(hosts)})" for version, hosts in by_version.items())
            for name, by_version in names.items()
        ]
        lines.append(f"{family} hosts differ: {'; '.join(parts)}")
    return lines
