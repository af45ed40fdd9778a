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

With `rounds` (a budget of interleaved rounds), the ends and each midpoint are decided instead on
captures taken in turn on one core (kernelsweep.report.interleaved): each position's first run gives
its NEFF, then a round captures the ends (good, bad) or the good end, the midpoint and the bad end,
in that order and reversed the next round (A B, B A: a drift along the session cancels over two
rounds). Both sides of every pair share the session's shift, the host and the core, so the pair's
log ratio carries only the captures' own jitter: t on the rounds' log ratios, the same verdict rule,
looked at after 3, 6, 12, ... rounds with the level halved at each look (as `compare --confirm`
spends it). The midpoint is bad when it is slower than the good end, good when the bad end is slower
than it, on the same rounds.

Runs come from `Runs`, which measures a position (or a round) only when its journal lacks it: a
bisection killed mid-way, run again, replays its journal through the same decisions and measures
nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kernelsweep.report.interleaved import FIRST_LOOK, looks, paired_effect
from kernelsweep.report.stats import Effect, Rule, Sample, Verdict, decide, effect

Status = Literal["found", "same", "undecided"]
MIN_RUNS = 2  # runs a position starts with: with one a side the run-to-run noise is unknown
MAX_RUNS = 6  # the default budget of runs per position


Position = Hashable  # an index on one axis; (build, commit) indices on two
Rounds = tuple[Position, ...]  # the positions a round captures in turn, good end first
# captures rounds `start`, `start` + 1, ... of these positions (`count` of them) on one core, each
# round's latencies in the positions' order
Capture = Callable[[Rounds, int, int], Iterator[tuple[float, ...]]]


def capture_order(number: int, size: int) -> list[int]:
    """Which of a round's `size` positions is captured when: in order on even rounds, reversed on odd
    ones, so a drift along the session adds as much to each pair's ratio as it takes away the next round."""
    forward = list(range(size))
    return forward if number % 2 == 0 else forward[::-1]


class Runs:
    """The runs of each position: from the journal while it has them, else measured and journaled."""

    def __init__(
        self,
        measure: Callable[[Any], Sample],
        journaled: dict[Any, list[Sample]] | None = None,
        on_run: Callable[[Any, Sample], None] | None = None,
        capture: Capture | None = None,
        journaled_rounds: dict[Rounds, list[tuple[float, ...]]] | None = None,
    ) -> None:
        self._measure, self._on_run, self._capture = measure, on_run, capture
        self.by_position: dict[Position, list[Sample]] = {k: list(v) for k, v in (journaled or {}).items()}
        self.by_rounds = {key: list(done) for key, done in (journaled_rounds or {}).items()}
        self.measured = 0  # runs this process measured (not replayed)
        self.captured = 0  # interleaved rounds this process captured (not replayed)

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

    def rounds(self, key: Rounds, count: int) -> list[tuple[float, ...]]:
        """The first `count` interleaved rounds of these positions, capturing those the journal lacks."""
        have = self.by_rounds.setdefault(key, [])
        if len(have) < count:
            assert self._capture is not None, "a bisection with rounds has a capture"
            for captured in self._capture(key, len(have), count - len(have)):
                have.append(captured)
                self.captured += 1
        return have[:count]


class Line:
    """One axis of a two-axis bisection as a one-axis one sees it: its position i is a grid position
    (the other axis held at its good end), so both axes share the good corner's runs."""

    def __init__(self, runs: Runs, place: Callable[[int], Position]) -> None:
        self._runs, self._place = runs, place

    def first(self, at: int, count: int) -> list[Sample]:
        return self._runs.first(self._place(at), count)

    def of(self, at: int) -> list[Sample]:
        return self._runs.of(self._place(at))

    def rounds(self, key: tuple[int, ...], count: int) -> list[tuple[float, ...]]:
        return self._runs.rounds(tuple(self._place(at) for at in key), count)


@dataclass(frozen=True)
class Step:
    """One midpoint judged: against the good end (is it slower?) and the bad end (is that slower than it?)."""

    at: int
    call: Literal["good", "bad", "undecided"]
    runs: int  # the midpoint's runs, or the interleaved rounds it was judged on
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
        return _step_at(self.steps, at)


def _step_at(steps: Sequence[Step], at: int) -> Step | None:
    return next((s for s in steps if s.at == at), None)


@dataclass
class Bisection:
    """A bisection of `count` positions under `rule`, with a budget of runs per position."""

    count: int
    runs: Runs | Line
    rule: Rule
    kernel: str
    max_runs: int = MAX_RUNS
    max_rounds: int = 0  # a budget of interleaved rounds a judgement; 0: judged on runs
    steps: list[Step] = field(default_factory=list)
    ends_rule: Rule | None = None  # the rule the ends were decided at (a later look's level, with rounds)

    def __post_init__(self) -> None:
        assert not self.max_rounds or self.max_rounds >= FIRST_LOOK, "fewer rounds than a first look cannot decide"

    def run(self) -> Outcome:
        return self.narrow(self.ends())

    def ends(self) -> Effect:
        """The bad end against the good one, with more runs (or rounds) of both until decided or the budget ends."""
        if self.max_rounds:
            for end in (0, self.count - 1):
                self.runs.first(end, 1)  # its NEFF, and its row
            for rule, (ends,) in self._looks((0, self.count - 1)):
                self.ends_rule = rule
                if self._verdict(ends, rule) != "inconclusive":
                    break
            return ends
        for count in range(MIN_RUNS, self.max_runs + 1):
            ends = self._effect(self.runs.first(0, count), self.runs.first(self.count - 1, count))
            if self._verdict(ends) != "inconclusive":
                break
        return ends

    def narrow(self, ends: Effect) -> Outcome:
        """With the ends judged: stop unless the bad one is slower, else halve the range to one change."""
        verdict = self._verdict(ends, self.ends_rule)
        if verdict != "slower":
            return Outcome("same" if verdict != "inconclusive" else "undecided", self._why_not(ends), ends)
        good, bad = 0, self.count - 1
        while bad - good > 1:
            step = self._judge((good + bad) // 2)
            self.steps.append(step)
            if step.call == "undecided":
                spent = f"{step.runs} {'rounds' if self.max_rounds else 'runs'}"
                why = f"position {step.at} undecided after {spent} (the budget); culprit in {good + 1}..{bad}"
                return Outcome("undecided", why, ends, good, bad, tuple(self.steps))
            good, bad = (step.at, bad) if step.call == "good" else (good, step.at)
        change = self._change(good, bad, ends)
        return Outcome("found", f"position {bad} made it slower", ends, good, bad, tuple(self.steps), change)

    def _change(self, good: int, bad: int, ends: Effect) -> Effect:
        """The culprit's change: on runs, its runs against the last good position's; on rounds, the
        step that put the two side by side (the midpoint against an end), or the ends themselves."""
        if not self.max_rounds:
            return self._effect(self.runs.of(good), self.runs.of(bad))
        judged_good, judged_bad = _step_at(self.steps, good), _step_at(self.steps, bad)
        if judged_bad is not None and good == 0:
            return judged_bad.against_good
        if judged_good is not None and bad == self.count - 1:
            return judged_good.against_bad
        return ends if (good, bad) == (0, self.count - 1) else self._rounds_change(good, bad)

    def _rounds_change(self, good: int, bad: int) -> Effect:
        """Two inner positions side by side: rounds of the pair, as many looks as the budget allows."""
        for rule, (change,) in self._looks((good, bad)):
            if self._verdict(change, rule) != "inconclusive":
                break
        return change

    def _looks(self, key: tuple[int, ...]) -> Iterator[tuple[Rule, list[Effect]]]:
        """After each look (3, 6, 12, ... rounds, the last the budget), the look's rule (alpha halved
        at each) and each position of `key` against the one before it, on the rounds so far."""
        threshold = self.rule.threshold_for(self.kernel)
        for look, after in enumerate(looks(self.max_rounds), start=1):
            rule = replace(self.rule, alpha=self.rule.alpha / 2**look)
            rounds = self.runs.rounds(key, after)
            yield (
                rule,
                [
                    paired_effect([r[i] for r in rounds], [r[i + 1] for r in rounds], threshold, rule.alpha)
                    for i in range(len(key) - 1)
                ],
            )

    def _judge(self, at: int) -> Step:
        if self.max_rounds:
            return self._judge_interleaved(at)
        good, bad = self.runs.of(0), self.runs.of(self.count - 1)
        for count in range(MIN_RUNS, self.max_runs + 1):
            runs = self.runs.first(at, count)
            against_good, against_bad = self._effect(good, runs), self._effect(runs, bad)
            is_bad, is_good = self._verdict(against_good) == "slower", self._verdict(against_bad) == "slower"
            if is_bad != is_good:
                return Step(at, "bad" if is_bad else "good", count, against_good, against_bad)
        return Step(at, "undecided", count, against_good, against_bad)

    def _judge_interleaved(self, at: int) -> Step:
        """The good end, the midpoint and the bad end captured in turn, round after round, until one
        call holds on a look or the budget of rounds ends."""
        self.runs.first(at, 1)  # its NEFF, and its row
        rounds = 0
        for rule, (against_good, against_bad) in self._looks((0, at, self.count - 1)):
            rounds = against_good.repeats[0]
            is_bad = self._verdict(against_good, rule) == "slower"
            is_good = self._verdict(against_bad, rule) == "slower"
            if is_bad != is_good:
                return Step(at, "bad" if is_bad else "good", rounds, against_good, against_bad)
        return Step(at, "undecided", rounds, against_good, against_bad)

    def _effect(self, a: list[Sample], b: list[Sample]) -> Effect:
        return effect(a, b, threshold=self.rule.threshold_for(self.kernel), alpha=self.rule.alpha)

    def _verdict(self, e: Effect, rule: Rule | None = None) -> Verdict:
        [(verdict, _, _)] = decide([e], rule or self.rule)
        return verdict

    def _why_not(self, ends: Effect) -> str:
        [(verdict, why, _)] = decide([ends], self.ends_rule or self.rule)
        if verdict == "inconclusive":
            budget = f"{self.max_rounds} interleaved rounds" if self.max_rounds else f"{self.max_runs} runs each"
            return f"the ends could not be told apart within {budget}: {why}"
        return f"the bad end is not slower than the good end ({verdict}: {why}); nothing to bisect"
