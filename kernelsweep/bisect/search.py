"""Bisection over one ordered axis (SDK builds, kernel commits): which single change made a point slower.

Positions 0 .. n-1 are the axis in order, 0 the good end and n-1 the bad one. Each run of a position
is one measurement of the point (its own run: another session of the device, with its own run-level
shift), and every verdict is the report's rule (kernelsweep.report.stats) on those runs' levels:

* The ends first: the bad end against the good one, with more runs of both until the rule decides or
  the budget ends. Not slower (same, faster, or undecided at the budget): say so and stop, the middle
  unmeasured.
* Then the middle of the range left: bad when it is slower than the good end, good when the bad end
  is slower than it; with more runs of it while both or neither hold, up to the budget. Judging against
  both ends, not the good one alone, lets a position be called with a regression well above the
  threshold without having to prove equivalence within +-threshold.
* Each judgement is one test (a family of one): a bisection's decisions are sequential, each acting on
  the last, not a family of simultaneous claims.

Runs come from `Runs`, which measures a position only when its journal lacks that run: a bisection
killed mid-way, run again, replays its journal through the same decisions and measures nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

from kernelsweep.report.stats import Effect, Rule, Sample, Verdict, decide, effect

Status = Literal["found", "same", "undecided"]
MIN_RUNS = 2  # runs a position starts with: with one a side the run-to-run noise is unknown
MAX_RUNS = 6  # the default budget of runs per position


Position = Hashable  # an index on one axis; (build, commit) indices on two


class Runs:
    """The runs of each position: from the journal while it has them, else measured and journaled."""

    def __init__(
        self,
        measure: Callable[[Any], Sample],
        journaled: dict[Any, list[Sample]] | None = None,
        on_run: Callable[[Any, Sample], None] | None = None,
    ) -> None:
        self._measure, self._on_run = measure, on_run
        self.by_position: dict[Position, list[Sample]] = {k: list(v) for k, v in (journaled or {}).items()}
        self.measured = 0  # runs this process measured (not replayed)

    def first(self, at: Position, count: int) -> list[Sample]:
        """The position's first `count` runs, measuring those the journal lacks."""
        have = self.by_position.setdefault(at, [])
        while len(have) < count:
            sample = self._measure(at)
            have.append(sample)
            self.measured += 1
            if self._on_run:
                self._on_run(at, sample)
        return have[:count]

    def of(self, at: Position) -> list[Sample]:
        return self.by_position[at]


class Line:
    """One axis of a two-axis bisection as a one-axis one sees it: its position i is a grid position
    (the other axis held at its good end), so both axes share the good corner's runs."""

    def __init__(self, runs: Runs, place: Callable[[int], Position]) -> None:
        self._runs, self._place = runs, place

    def first(self, at: int, count: int) -> list[Sample]:
        return self._runs.first(self._place(at), count)

    def of(self, at: int) -> list[Sample]:
        return self._runs.of(self._place(at))


@dataclass(frozen=True)
class Step:
    """One midpoint judged: against the good end (is it slower?) and the bad end (is that slower than it?)."""

    at: int
    call: Literal["good", "bad", "undecided"]
    runs: int
    against_good: Effect
    against_bad: Effect


@dataclass(frozen=True)
class Outcome:
    status: Status
    why: str
    ends: Effect
    good: int = 0  # the last position known good
    bad: int = 0  # the first position known bad
    steps: tuple[Step, ...] = ()
    culprit_step: Effect | None = None  # the change good -> bad, on their runs

    @property
    def decided_steps(self) -> int:
        return sum(s.call != "undecided" for s in self.steps)

    def steps_by(self, at: int) -> Step | None:
        """The step that judged this position; None for an end (judged by the ends' comparison)."""
        return next((s for s in self.steps if s.at == at), None)


@dataclass
class Bisection:
    """A bisection of `count` positions under `rule`, with a budget of runs per position."""

    count: int
    runs: Runs | Line
    rule: Rule
    kernel: str
    max_runs: int = MAX_RUNS
    steps: list[Step] = field(default_factory=list)

    def run(self) -> Outcome:
        return self.narrow(self.ends())

    def ends(self) -> Effect:
        """The bad end against the good one, with more runs of both until decided or the budget ends."""
        for count in range(MIN_RUNS, self.max_runs + 1):
            ends = self._effect(self.runs.first(0, count), self.runs.first(self.count - 1, count))
            if self._verdict(ends) != "inconclusive":
                break
        return ends

    def narrow(self, ends: Effect) -> Outcome:
        """With the ends judged: stop unless the bad one is slower, else halve the range to one change."""
        if self._verdict(ends) != "slower":
            return Outcome("same" if self._verdict(ends) != "inconclusive" else "undecided", self._why_not(ends), ends)
        good, bad = 0, self.count - 1
        while bad - good > 1:
            step = self._judge((good + bad) // 2)
            self.steps.append(step)
            if step.call == "undecided":
                why = f"position {step.at} undecided after {step.runs} runs (the budget); culprit in {good + 1}..{bad}"
                return Outcome("undecided", why, ends, good, bad, tuple(self.steps))
            good, bad = (step.at, bad) if step.call == "good" else (good, step.at)
        change = self._effect(self.runs.of(good), self.runs.of(bad))
        return Outcome("found", f"position {bad} made it slower", ends, good, bad, tuple(self.steps), change)

    def _judge(self, at: int) -> Step:
        good, bad = self.runs.of(0), self.runs.of(self.count - 1)
        for count in range(MIN_RUNS, self.max_runs + 1):
            runs = self.runs.first(at, count)
            against_good, against_bad = self._effect(good, runs), self._effect(runs, bad)
            is_bad, is_good = self._verdict(against_good) == "slower", self._verdict(against_bad) == "slower"
            if is_bad != is_good:
                return Step(at, "bad" if is_bad else "good", count, against_good, against_bad)
        return Step(at, "undecided", count, against_good, against_bad)

    def _effect(self, a: list[Sample], b: list[Sample]) -> Effect:
        return effect(a, b, threshold=self.rule.threshold_for(self.kernel), alpha=self.rule.alpha)

    def _verdict(self, e: Effect) -> Verdict:
        [(verdict, _, _)] = decide([e], self.rule)
        return verdict

    def _why_not(self, ends: Effect) -> str:
        [(verdict, why, _)] = decide([ends], self.rule)
        if verdict == "inconclusive":
            return f"the ends could not be told apart within {self.max_runs} runs each: {why}"
        return f"the bad end is not slower than the good end ({verdict}: {why}); nothing to bisect"
