"""Which platform family this host is, and so which points it may capture.

A NEFF is compiled for one target: a trn1 NEFF cannot be captured on a trn2 (the runtime refuses
it), so a host runs only the points of its own family and leaves the rest for hosts of theirs. The
family comes from the instance type (`trn2.48xlarge` -> trn2), read from the host (DMI) or from
neuron-ls; a simulated host is told it (KERNELSWEEP_SIM_PLATFORM) or, untold, emulates every family.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.sweepspec.point import Point

_FAMILY_ALIASES = {"trn1n": "trn1"}  # trn1n.32xlarge is a trn1 with more network


def family_of(instance_type: str | None) -> str | None:
    """`trn2.48xlarge` -> `trn2`, `trn1n.32xlarge` -> `trn1`, `trn2.sim` -> `trn2`; None if not a Neuron host."""
    prefix = (instance_type or "").split(".")[0]
    family = _FAMILY_ALIASES.get(prefix, prefix)
    return family if family in PLATFORM_NAMES else None


@dataclass(frozen=True)
class HostPlatform:
    family: str | None  # None: every family (a simulator emulating all of them, or an unknown host)
    source: str  # how it was decided, for the notice

    def runs(self, platform: str) -> bool:
        return self.family is None or self.family == platform

    def split(self, points: Iterable[Point]) -> tuple[list[Point], Counter[str]]:
        """(the points this host runs, how many it leaves per other platform)."""
        mine, left = [], Counter[str]()
        for point in points:
            if self.runs(point.platform):
                mine.append(point)
            else:
                left[point.platform] += 1
        return mine, left

    def notice(self, left: Counter[str], total: int) -> str | None:
        if not left:
            return None
        others = ", ".join(f"{count} {platform}" for platform, count in sorted(left.items()))
        ran = total - sum(left.values())
        return (
            f"this host is {self.family} ({self.source}): running its {ran} of {total} points; "
            f"left for other hosts: {others}"
        )


def host_platform(*instance_types: str | None, simulated: bool) -> HostPlatform:
    """The first instance type that names a Neuron family decides; none does: every family."""
    for instance_type in instance_types:
        family = family_of(instance_type)
        if family:
            return HostPlatform(family, f"instance type {instance_type}")
    return HostPlatform(None, "simulator emulating every family" if simulated else "instance type unknown")
