"""Code a simulated compiler emits that runs slower for some points: `KERNEL[/AXIS=VALUE...]:FACTOR`
entries, the grammar both KERNELSWEEP_SIM_COMPILER_SLOWDOWN (sim.config) and the culprit build
(sim.culprit_build) read."""

from __future__ import annotations

from dataclasses import dataclass

SLOWDOWN_ENV = "KERNELSWEEP_SIM_COMPILER_SLOWDOWN"


@dataclass(frozen=True)
class Slowdown:
    kernel: str
    params: dict[str, int]
    factor: float

    def matches(self, kernel: str, params: dict[str, int]) -> bool:
        return kernel == self.kernel and all(params.get(axis) == value for axis, value in self.params.items())


def parse_slowdowns(text: str) -> tuple[Slowdown, ...]:
    found = []
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        target, _, factor = entry.rpartition(":")
        kernel, *terms = target.split("/")
        try:
            params = {axis.strip(): int(value) for axis, value in (term.split("=") for term in terms)}
            found.append(Slowdown(kernel.strip(), params, float(factor)))
        except ValueError:
            raise ValueError(f"{SLOWDOWN_ENV}: bad entry {entry!r}; use KERNEL[/AXIS=VALUE...]:FACTOR") from None
    return tuple(found)
