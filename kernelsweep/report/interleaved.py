"""Deciding a suspect by measuring A and B again, interleaved: `compare --confirm`.

A compare that leaves a point inconclusive but leaning slower (a suspect, exit 3) can be settled by
measuring more. Captured alternately on one NeuronCore (A, B, A, B, ...), both sides share what the
machine does during the session: the host, the core, its clocks and temperature, the run's shift.
So each round's log ratio, log(B) - log(A), carries only the two captures' own jitter, and the mean
of the rounds' ratios narrows as rounds are added, where another run a side would add the run-to-run
noise again. The interval is Student's t on the rounds' log ratios.

Looking again after every few rounds would let noise through at some look, so the error level is
spent: the k-th look (after 3, 6, 12, ... rounds) tests at alpha / 2^k, and the points confirmed
together split alpha between them (Bonferroni), so the chance of any false verdict over the whole
confirmation stays at most alpha. A point is decided at the first look where its interval lies
above +threshold (slower), below -threshold (faster) or inside +-threshold (same); when the budget
runs out first it stays inconclusive, with the rounds that would decide it at the rate seen.

The same loop decides the CLI's captures and benchmarks/verdicts.py's simulated ones (`confirm`).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from scipy.special import stdtrit

from kernelsweep.report.stats import TINY, Effect, interval, margins, t_effect

FIRST_LOOK = 3  # rounds before the first look: fewer cannot estimate the rounds' spread
MOST_ROUNDS = 1 << 20  # a point no budget this size decides is not worth a figure
REPEATS_PER_ROUND = 2  # a round is one capture of A and one of B
# `compare --confirm`'s default budget over all suspects: 60 rounds, or ten minutes of captures
DEFAULT_REPEATS, DEFAULT_SECONDS = 120, 600.0

Round = Callable[[], tuple[float, float]]  # captures A, then B; their latencies


@dataclass(frozen=True)
class Budget:
    """What the whole confirmation may spend: captures (A's and B's together) and wall seconds."""

    repeats: int
    seconds: float

    def describe(self) -> str:
        return f"{self.repeats} repeats or {self.seconds:g} s"


@dataclass(frozen=True)
class Decision:
    """A confirmed point: its verdict on the interleaved rounds, why, and what deciding it cost; when
    undecided, the rounds that would decide it at the spread seen (None: none would, or unknown)."""

    outcome: str  # slower | faster | same | inconclusive
    why: str
    effect: Effect | None
    a_us: list[float]
    b_us: list[float]
    seconds: float
    rounds_needed: int | None = None

    @property
    def repeats(self) -> int:
        return len(self.a_us) + len(self.b_us)

    @property
    def seconds_per_round(self) -> float:
        return self.seconds / len(self.a_us) if self.a_us else math.nan


def looks(last: int) -> list[int]:
    """The rounds after which a point is judged: 3, 6, 12, ... and the last round the budget allows."""
    due, n = [], FIRST_LOOK
    while n < last:
        due.append(n)
        n *= 2
    return [*due, last] if last >= FIRST_LOOK else []


@dataclass
class _Point:
    threshold: float
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)

    def effect(self, alpha: float) -> Effect:
        return paired_effect(self.a, self.b, self.threshold, alpha)


def paired_effect(a: Sequence[float], b: Sequence[float], threshold: float, alpha: float) -> Effect:
    """B against A on rounds captured in turn on one core: Student's t on the rounds' log ratios
    (at least two rounds), as many repeats a side as rounds."""
    logs = [math.log(y) - math.log(x) for x, y in zip(a, b, strict=True)]
    n = len(logs)
    se = max(TINY, statistics.stdev(logs) / math.sqrt(n))
    method = f"t on {n} interleaved rounds' log ratios, captured on one core ({n - 1} df)"
    return t_effect(statistics.fmean(logs), se, n - 1, alpha, threshold, method, (1, 1), (n, n))


def _verdict(e: Effect, alpha: float) -> str | None:
    if e.p_above <= alpha:
        return "slower"
    if e.p_below <= alpha:
        return "faster"
    if 1 - e.threshold <= e.low and e.high <= 1 + e.threshold:
        return "same"
    return None


def rounds_to_decide(e: Effect, alpha: float, done: int) -> int | None:
    """The first look after `done` rounds (3, 6, 12, ...) at which the change and spread seen would be
    decided at that look's level, or None when the change sits on the threshold (no number of rounds
    decides it, or none below a million)."""
    centre, spread = math.log(e.ratio), e.se * math.sqrt(e.repeats[0])
    down, up = margins(e.threshold)
    room = max(centre - up, down - centre) if not down < centre < up else min(up - centre, centre - down)
    n, look = FIRST_LOOK, 1
    while n < MOST_ROUNDS and room > 1e-4:  # within a hundredth of a percent of the threshold: never
        if n > done and float(stdtrit(n - 1, 1 - alpha / 2**look)) * spread / math.sqrt(n) <= room:
            return n
        n, look = 2 * n, look + 1
    return None


def confirm_point(
    measure: Round, threshold: float, alpha: float, rounds: int, seconds: float, clock: Callable[[], float]
) -> Decision:
    """Rounds of A then B until a look decides, `rounds` are done, or `seconds` have passed."""
    point, started = _Point(threshold), clock()
    due = looks(rounds)
    found: Effect | None = None
    for look, after in enumerate(due, start=1):
        while len(point.a) < after and clock() - started < seconds:
            a_us, b_us = measure()
            point.a.append(a_us)
            point.b.append(b_us)
        if len(point.a) < FIRST_LOOK:
            break
        level = alpha / 2**look
        found = point.effect(level)
        decided = _verdict(found, level)
        if decided:
            why = f"{interval(found)} on {len(point.a)} interleaved rounds; decided at alpha {level:.2g}"
            return Decision(decided, why, found, point.a, point.b, clock() - started)
        if len(point.a) < after:  # the seconds ran out before this look's rounds
            break
    spent = clock() - started
    if found is None:
        why = (
            f"the budget left this point {len(point.a)} interleaved round(s); {FIRST_LOOK} rounds "
            f"({REPEATS_PER_ROUND * FIRST_LOOK} repeats) are the fewest that bound a change"
        )
        return Decision("inconclusive", why, None, point.a, point.b, spent, FIRST_LOOK)
    need = rounds_to_decide(found, alpha, len(point.a))
    repeats = REPEATS_PER_ROUND * len(point.a)
    done = f"{interval(found)} after {len(point.a)} interleaved rounds ({repeats} repeats, {spent:.1f} s)"
    if need is None:
        why = f"{done}: the change sits on the +-{threshold:.0%} threshold, where no number of rounds decides it"
        return Decision("inconclusive", why, found, point.a, point.b, spent)
    why = (
        f"{done} still crosses +-{threshold:.0%}: about {REPEATS_PER_ROUND * need} repeats "
        f"(~{need * spent / len(point.a):.0f} s) for this point would decide it"
    )
    return Decision("inconclusive", why, found, point.a, point.b, spent, need)


def confirm(
    points: Sequence[AbstractContextManager[Round]],
    thresholds: Sequence[float],
    alpha: float,
    budget: Budget,
    clock: Callable[[], float] = time.monotonic,
) -> list[Decision]:
    """Each suspect in turn (entering its context: the CLI leases its core there), each with an even
    share of what is left of the budget; the points split alpha between them."""
    per_point = alpha / max(1, len(points))
    decisions: list[Decision] = []
    for index, (opened, threshold) in enumerate(zip(points, thresholds, strict=True)):
        left = len(points) - index
        rounds = (budget.repeats - sum(d.repeats for d in decisions)) // (REPEATS_PER_ROUND * left)
        seconds = (budget.seconds - sum(d.seconds for d in decisions)) / left
        with opened as measure:
            decisions.append(confirm_point(measure, threshold, per_point, rounds, seconds, clock))
    return decisions
