"""A bisection asked for by a nightly step: the report's regression, when what changed across it is the
compiler, becomes the request a bisect flow runs (kernelsweep.flows.bisect), carried by the event
`STEP_EVENT` the report emits and the fleet's automation turns into a flow run on the point's family.

The request holds the point (as its series names it), the two ends (the compiler version before and
after the step, the build a bisection installs for each) and the step's evidence (levels, ratio and
interval), which the bisect's notice repeats beside the culprit. The builds between the ends come
from the list the operator keeps in release order (`BUILDS_VARIABLE`); without it, or when an end is
not in it, the two ends alone are bisected (the culprit is then the newer end, confirmed or not).

Only steps a bisection can act on become requests: the compiler changed, the point has no variant
(LNC, tunables, named toolchain) and its versions are simulated ones, since SDK builds are installed
as the simulator's compiler versions only for now (docs/bisect.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from kernelsweep.errors import UsageError
from kernelsweep.sim import SIM_VERSION_SUFFIX

STEP_EVENT = "kernelsweep.step.found"
BUILDS_VARIABLE = "kernelsweep_sdk_builds"  # a JSON list of SDK builds in release order (Prefect variable)
FAMILY_LABEL = "kernelsweep.family"  # the step event's resource label its automation matches


@dataclass(frozen=True)
class StepRequest:
    """One point's step, and what a bisect flow needs to look for its culprit build."""

    kernel: str
    shape: str  # as the row writes it: AXIS=VALUE,...
    dtype: str
    platform: str
    night: str  # the first night after the step
    results: str  # the results the step was found in (the bisect's journal and rows go there too)
    good_build: str  # the compiler version before the step
    bad_build: str  # and after it
    before_us: float
    after_us: float
    change_percent: float
    ci_low_percent: float
    ci_high_percent: float
    runs: str  # "N v M": the runs each side of the step

    @property
    def series(self) -> str:
        return f"{self.kernel} {self.shape} {self.dtype} {self.platform}"

    @property
    def key(self) -> str:
        """The step itself (its point and its night), whichever builds its bisection walks."""
        return f"{self.series} since {self.night}"

    def evidence(self) -> str:
        """The nightly step as the report judged it."""
        return (
            f"the nightly step since {self.night}: {self.before_us} us -> {self.after_us} us "
            f"({self.change_percent:+}%, interval {self.ci_low_percent:+}% to {self.ci_high_percent:+}%, "
            f"{self.runs} runs), compiler {self.good_build} -> {self.bad_build}"
        )

    def builds(self, release_order: Sequence[str]) -> list[str]:
        """The builds from the good end to the bad one: those of `release_order` between them when it
        holds both in that order, else the two ends alone."""
        known = [str(b).strip() for b in release_order]
        if self.good_build in known and self.bad_build in known:
            first, last = known.index(self.good_build), known.index(self.bad_build)
            if first < last:
                return known[first : last + 1]
        return [self.good_build, self.bad_build]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepRequest:
        """The request an event carried; one line naming what is missing otherwise."""
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in data]
        if missing:
            raise UsageError(f"a bisect request lacks {', '.join(missing)}; start it from the report's step event")
        return cls(**{name: data[name] for name in names})


def request_of(step_row: Mapping[str, Any], changes: Mapping[str, tuple[str | None, str | None]], results: str) -> (
    StepRequest | None
):  # fmt: skip
    """The bisect request for a step (its report row and lineage changes), or None when a bisection
    cannot act on it: no compiler change, a variant, or versions that are not the simulator's."""
    old, new = changes.get("compiler", (None, None))
    if not old or not new or step_row.get("variant"):
        return None
    if not (old.endswith(SIM_VERSION_SUFFIX) and new.endswith(SIM_VERSION_SUFFIX)):
        return None
    return StepRequest(
        kernel=str(step_row["kernel"]),
        shape=str(step_row["shape"]),
        dtype=str(step_row["dtype"]),
        platform=str(step_row["platform"]),
        night=str(step_row["night"]),
        results=results,
        good_build=old.removesuffix(SIM_VERSION_SUFFIX),
        bad_build=new.removesuffix(SIM_VERSION_SUFFIX),
        before_us=float(step_row["before_us"]),
        after_us=float(step_row["after_us"]),
        change_percent=float(step_row["change_percent"]),
        ci_low_percent=float(step_row["ci_low_percent"]),
        ci_high_percent=float(step_row["ci_high_percent"]),
        runs=str(step_row["runs"]),
    )
