"""A simulated SDK build that brings a regression and keeps it: from compiler version V on, the code
the compiler emits for a kernel runs FACTOR times as long (KERNELSWEEP_SIM_CULPRIT_BUILD).

`COMPILER_SLOWDOWN` slows whatever build it is set beside; this one knows the builds' order, so one
setting plays a whole ordered range of SDK builds in which exactly one build did it: what
`kernelsweep bisect` over SDK builds must find (docs/bisect.md). Versions compare by their numeric
parts (2.9 < 2.10); the `+kernelsweep.sim` the simulator appends is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelsweep.sim.slowdowns import Slowdown, parse_slowdowns


@dataclass(frozen=True)
class CulpritBuild:
    since: tuple[int, ...]
    slowdown: Slowdown

    def factor(self, compiler_version: str, kernel: str, params: dict[str, int]) -> float:
        """FACTOR when this version is the culprit build or a later one and the point matches, else 1."""
        version = version_key(compiler_version)
        applies = version is not None and version >= self.since and self.slowdown.matches(kernel, params)
        return self.slowdown.factor if applies else 1.0


def version_key(version: str) -> tuple[int, ...] | None:
    """2.22.41000.0+kernelsweep.sim as (2, 22, 41000, 0); None when a part is not a number."""
    try:
        return tuple(int(part) for part in version.split("+")[0].split("."))
    except ValueError:
        return None


def parse_culprit(env: str, text: str | None) -> CulpritBuild | None:
    """`VERSION@KERNEL[/AXIS=VALUE...]:FACTOR`, or None when unset."""
    if not text:
        return None
    since, sep, rest = text.partition("@")
    key = version_key(since.strip())
    slowdowns = _slowdowns(rest) if sep and key else ()
    if len(slowdowns) != 1:
        raise ValueError(f"{env}={text!r}: give VERSION@KERNEL[/AXIS=VALUE...]:FACTOR, e.g. 2.24.0@vector_add:1.1")
    assert key is not None
    return CulpritBuild(key, slowdowns[0])


def _slowdowns(text: str) -> tuple[Slowdown, ...]:
    try:
        return parse_slowdowns(text)
    except ValueError:
        return ()
