"""A bisection's outcome in words: each decided step with its evidence, then the culprit with the
change it made and each side's standing against the ends."""

from __future__ import annotations

from kernelsweep.bisect.axis import Axis
from kernelsweep.bisect.search import Outcome
from kernelsweep.report.stats import Effect, interval


def lines(outcome: Outcome, axis: Axis) -> list[str]:
    good, bad = axis.describe(0), axis.describe(len(axis.labels) - 1)
    out = [f"ends: {bad} against {good}: {_shown(outcome.ends)}"]
    for step in outcome.steps:
        out.append(
            f"step {axis.describe(step.at)}: {step.call} after {step.runs} {_unit(step.against_good)} "
            f"(against the good end {_shown(step.against_good)}; the bad end against it {_shown(step.against_bad)})"
        )
    if outcome.status != "found":
        return [*out, outcome.why]
    assert outcome.culprit_step is not None
    last_good, culprit = outcome.steps_by(outcome.good), outcome.steps_by(outcome.bad)
    out.append(
        f"culprit: {axis.describe(outcome.bad)} (after {axis.describe(outcome.good)}): {_shown(outcome.culprit_step)}"
    )
    if last_good is not None:
        out.append(f"  {axis.describe(outcome.good)} against the good end: {_shown(last_good.against_good)}")
    if culprit is not None:
        out.append(f"  the bad end against {axis.describe(outcome.bad)}: {_shown(culprit.against_bad)}")
    return out


def _shown(e: Effect) -> str:
    if _unit(e) == "rounds":
        return f"{interval(e)} over {e.repeats[0]} interleaved rounds on one core"
    return f"{interval(e)} over {e.runs[0]} v {e.runs[1]} runs"


def _unit(e: Effect) -> str:
    """What an effect rests on: runs of each side, or rounds captured in turn (report.interleaved)."""
    return "rounds" if "interleaved rounds" in e.method else "runs"


def both_lines(first: Outcome, second: Outcome, axes: tuple[Axis, Axis]) -> list[str]:
    """Which axis holds a culprit (each corner against the good corner), then each axis's bisection."""
    out = []
    for outcome, axis in zip((first, second), axes, strict=True):
        holds = {"found": "holds a culprit", "same": "holds none", "undecided": "undecided"}[outcome.status]
        if outcome.status == "undecided" and outcome.steps:
            holds = "holds a culprit (not narrowed within the budget)"
        out.append(f"{axis.kind}: {holds}: {_shown(outcome.ends)}")
    for outcome, axis in zip((first, second), axes, strict=True):
        out += [f"{axis.kind}: {line}" for line in lines(outcome, axis)[1:]]
    return out
