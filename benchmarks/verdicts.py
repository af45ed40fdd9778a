"""How often `compare` calls a point slower, by sweep size, repeats, true change and run-level noise:
the false-alarm and power tables of docs/reports.md, for the cases teams meet (one point among many
changed, every point changed, nothing changed) with and without a history of earlier nights.

Latencies are drawn like the simulator draws them (kernelsweep.sim: a 1% normal jitter per repeat, a
normal shift per point per run with the run-level sd, and optionally a shift shared by every point of
a run), and the real verdict code decides them: each point's spread from its history (HISTORY
earlier nights, or none on a first compare), the prior the sweep's points lend each other
(kernelsweep.report.prior, as `compare` groups them), then `compare.judge` over the family.

Confirmation (`--confirm`): every suspect (an inconclusive point whose own test leans slower, what
makes `compare` exit 3) is decided as `compare --confirm` decides it: kernelsweep.report.interleaved's
`confirm`, the CLI's own loop, with its default budget, fed rounds drawn from the same noise model:
A's and B's captures interleaved in one session of one core share the point's run shift and the
run's shared shift, and each capture has its own jitter. The extra repeats are counted. Nothing here
is measured on a machine: the figures follow from the configured noise and the rule.

    python benchmarks/verdicts.py [--families 200] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np

from kernelsweep.report import interleaved, prior
from kernelsweep.report.compare import judge
from kernelsweep.report.interleaved import DEFAULT_REPEATS, Budget
from kernelsweep.report.stats import Effect, Rule, Sample, Spread, effect, spread_of

JITTER = 0.01  # kernelsweep.sim.model.predict's per-repeat jitter
HISTORY = 20  # earlier nights of each series the run-to-run spread is learned from (about three weeks)
REPEATS = (3, 7, 15)
RUN_NOISE = (0.005, 0.01, 0.02)
POINTS = (1, 36, 500)
CHANGES = (0.05, 0.10, 0.20)


def runs(
    rng: np.random.Generator, points: int, count: int, repeats: int, run_noise: float, change: np.ndarray | float,
    shared: float = 0.0,
) -> np.ndarray:  # fmt: skip
    """Latencies, shape (points, count, repeats): each run of each point shifted on its own, and every
    point of a run by the run's shared shift."""
    own = 1 + run_noise * rng.standard_normal((points, count, 1))
    common = 1 + shared * rng.standard_normal((1, count, 1))
    scale = 100 * (1 + np.reshape(change, (-1, 1, 1)))
    return scale * own * common * (1 + JITTER * rng.standard_normal((points, count, repeats)))


def sample(values: np.ndarray) -> Sample:
    return Sample(
        n=len(values),
        median=float(np.median(values)),
        min=float(values.min()),
        max=float(values.max()),
        values=tuple(values.tolist()),
    )


@dataclass(frozen=True)
class Draw:
    """One comparison of a sweep: each point's outcome, and what confirmation cost."""

    outcomes: list[str]
    suspects: int
    extra_repeats: int

    @property
    def exit_code(self) -> int:
        return 1 if "slower" in self.outcomes else 3 if self.suspects else 0


def spreads(
    rng: np.random.Generator, points: int, repeats: int, run_noise: float, shared: float, history: bool,
    a: np.ndarray, b: np.ndarray,
) -> list[Spread]:  # fmt: skip
    """Each point's spread as `compare` makes it: its history with the group's prior, or on a first
    compare the spread of the points' changes."""
    if history:
        nights = np.log(np.median(runs(rng, points, HISTORY, repeats, run_noise, 0.0, shared), axis=2))
        own = [spread_of([nights[i]], f"{HISTORY} earlier nights") for i in range(points)]
        lent = prior.fit(own)
        return [prior.moderate(s, lent) for s in own]
    changes = np.log(np.median(b[:, 0], axis=1)) - np.log(np.median(a[:, 0], axis=1))
    lent = prior.from_changes(changes.tolist())
    return [lent] * points


def effects(a: np.ndarray, b: np.ndarray, spread: list[Spread], rule: Rule) -> list[Effect]:
    return [
        effect(
            [sample(r) for r in a[i]],
            [sample(r) for r in b[i]],
            threshold=rule.threshold,
            alpha=rule.alpha,
            spread_a=spread[i],
            spread_b=spread[i],
        )  # fmt: skip
        for i in range(len(a))
    ]


def compare_once(
    rng: np.random.Generator, change: np.ndarray, repeats: int, run_noise: float, *, history: bool = True,
    confirm: bool = False, shared: float = 0.0, rule: Rule | None = None,
) -> Draw:  # fmt: skip
    """One run a side of every point, judged as `compare --runs` judges them; suspects confirmed on
    request."""
    rule = rule or Rule()
    points = len(change)
    a = runs(rng, points, 1, repeats, run_noise, 0.0, shared)
    b = runs(rng, points, 1, repeats, run_noise, change, shared)
    spread = spreads(rng, points, repeats, run_noise, shared, history, a, b)
    judged = judge(effects(a, b, spread, rule), rule)
    outcomes = [j[0] for j in judged]
    suspects = [i for i, j in enumerate(judged) if j[4]]
    if not (confirm and suspects):
        return Draw(outcomes, len(suspects), 0)
    sessions = [_session(rng, float(change[i]), run_noise, shared) for i in suspects]
    budget = Budget(DEFAULT_REPEATS, math.inf)
    decided = interleaved.confirm(sessions, [rule.threshold] * len(suspects), rule.alpha, budget, clock=lambda: 0.0)
    for i, found in zip(suspects, decided, strict=True):
        outcomes[i] = found.outcome
    left = sum(found.outcome == "inconclusive" for found in decided)
    return Draw(outcomes, left, sum(found.repeats for found in decided))


def _session(
    rng: np.random.Generator, change: float, run_noise: float, shared: float
) -> AbstractContextManager[interleaved.Round]:
    """A suspect's confirmation session: A and B of one point on one core share the session's shift
    for the point and the run's shared shift; each capture has its own jitter."""
    level = 100 * (1 + run_noise * rng.standard_normal()) * (1 + shared * rng.standard_normal())

    def round_() -> tuple[float, float]:
        jitter = 1 + JITTER * rng.standard_normal(2)
        return float(level * jitter[0]), float(level * (1 + change) * jitter[1])

    return nullcontext(round_)


def lone(
    seed: int, families: int, points: int, repeats: int, run_noise: float, change: float, confirm: bool
) -> tuple[float, float]:
    """(share of draws calling the one changed point slower, mean extra repeats per compare)."""
    rng = np.random.default_rng(seed)
    found, extra = 0, 0
    for _ in range(families):
        drawn = compare_once(rng, _one_changed(points, change), repeats, run_noise, confirm=confirm)
        found += drawn.outcomes[0] == "slower"
        extra += drawn.extra_repeats
    return found / families, extra / families


def _one_changed(points: int, change: float) -> np.ndarray:
    sizes = np.zeros(points)
    sizes[0] = change
    return sizes


def unchanged(
    seed: int, families: int, points: int, repeats: int, run_noise: float, *, history: bool, confirm: bool,
    shared: float = 0.0,
) -> dict[str, float]:  # fmt: skip
    """Over unchanged sweeps: share of points called slower, and of compares exiting 1, 3 and 0."""
    rng = np.random.default_rng(seed)
    slower, exits = 0, {0: 0, 1: 0, 3: 0}
    for _ in range(families):
        drawn = compare_once(rng, np.zeros(points), repeats, run_noise, history=history, confirm=confirm,
                             shared=shared)  # fmt: skip
        slower += drawn.outcomes.count("slower")
        exits[drawn.exit_code] += 1
    return {"points slower": slower / (families * points), **{f"exit {k}": v / families for k, v in exits.items()}}


def one_kernel_slower(seed: int, families: int, confirm: bool) -> str:
    """A first compare of 36 points (3 kernels of 12, 7 repeats, 1% run noise) where the first kernel's
    12 points got 15% slower: how often it exits 1 calling exactly those points slower."""
    rng = np.random.default_rng(seed)
    change = np.where(np.arange(36) < 12, 0.15, 0.0)
    exact = exit_1 = 0
    for _ in range(families):
        drawn = compare_once(rng, change, 7, 0.01, history=False, confirm=confirm)
        exit_1 += drawn.exit_code == 1
        exact += [i for i, o in enumerate(drawn.outcomes) if o == "slower"] == list(range(12))
    case = f"one kernel of 3 (12 of 36 points) 15% slower, first compare, 7 repeats, 1% run noise, confirm={confirm}"
    return f"{case}: exit 1 {100 * exit_1 / families:.1f}%, exactly its points slower {100 * exact / families:.1f}%"


def all_changed(seed: int, families: int, points: int, repeats: int, run_noise: float, change: float) -> float:
    """Share of points called slower when every point of the sweep changed by `change` (no confirmation)."""
    rng = np.random.default_rng(seed)
    found = sum(compare_once(rng, np.full(points, change), repeats, run_noise).outcomes.count("slower")
                for _ in range(families))  # fmt: skip
    return found / (families * points)


def all_changed_table(families: int) -> None:
    print(f"\nEvery one of 500 points changed, history of {HISTORY} nights, no confirmation; % of points called slower")
    print("| repeats | run-level sd | " + " | ".join(f"{c:+.0%}" for c in CHANGES) + " |")
    print("|---|---|" + "---|" * len(CHANGES))
    for repeats in REPEATS:
        for run_noise in RUN_NOISE:
            sweeps = max(1, families // 20)  # 500 points a sweep: a few sweeps are thousands of points
            shares = [
                all_changed(_seed("all", repeats, run_noise, c), sweeps, 500, repeats, run_noise, c) for c in CHANGES
            ]
            print(f"| {repeats} | {run_noise:.1%} | {' | '.join(f'{100 * x:.1f}' for x in shares)} |", flush=True)


def lone_table(families: int, confirm: bool) -> None:
    title = "with confirmation of suspects" if confirm else "no confirmation"
    print(f"\nOne changed point among 1 / 36 / 500, history of {HISTORY} nights, {title}; % of draws calling it slower")
    print("| repeats | run-level sd | " + " | ".join(f"{c:+.0%}" for c in CHANGES) + " | extra repeats (+10%, 500) |")
    print("|---|---|" + "---|" * (len(CHANGES) + 1))
    for repeats in REPEATS:
        for run_noise in RUN_NOISE:
            cells, cost = [], 0.0
            for change in CHANGES:
                shares = []
                for points in POINTS:
                    share, extra = lone(_seed(repeats, run_noise, change, points), families, points, repeats, run_noise,
                                        change, confirm)  # fmt: skip
                    shares.append(f"{100 * share:.1f}")
                    cost = extra if (change, points) == (0.10, 500) else cost
                cells.append(" / ".join(shares))
            print(f"| {repeats} | {run_noise:.1%} | {' | '.join(cells)} | {cost:.0f} |", flush=True)


def unchanged_table(families: int) -> None:
    print("\nNothing changed, one run a side: % of points called slower; % of compares exiting 1 / 3 / 0")
    headers = ["points", "repeats", "run-level sd", "shared sd", "history", "confirmed", "points slower"]
    print(f"| {' | '.join(headers)} | exit 1 | exit 3 | exit 0 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for points in (36, 500):
        for repeats in (7, 15):
            for run_noise, shared in ((0.005, 0.0), (0.01, 0.0), (0.02, 0.0), (0.01, 0.01)):
                for history in (True, False):
                    for confirm in (False, True):
                        found = unchanged(_seed(points, repeats, run_noise, shared, history, confirm), families,
                                          points, repeats, run_noise, history=history, confirm=confirm,
                                          shared=shared)  # fmt: skip
                        cells = [f"{points}", f"{repeats}", f"{run_noise:.1%}", f"{shared:.1%}",
                                 "20 nights" if history else "none", "yes" if confirm else "no",
                                 f"{100 * found['points slower']:.2f}",
                                 *(f"{100 * found[f'exit {k}']:.1f}" for k in (1, 3, 0))]  # fmt: skip
                        print(f"| {' | '.join(cells)} |", flush=True)


def _seed(*parts: object) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(repr(parts))) % 2**32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", type=int, default=200, help="comparisons drawn per cell")
    parser.add_argument("--quick", action="store_true", help="only the done-when figures")
    parser.add_argument("--only", choices=("lone", "all", "unchanged"), help="one table, not every one")
    args = parser.parse_args()
    print(f"{Rule().describe(500)}; jitter {JITTER:.0%} per repeat; {args.families} compares a cell")
    started = time.process_time()
    if not args.only:  # the done-when figures
        for confirm in (False, True):
            share, extra = lone(1, args.families, 500, 7, 0.01, 0.10, confirm)
            print(f"lone +10% among 500 points, 7 repeats, 1% run noise, confirm={confirm}: {100 * share:.1f}% slower, "
                  f"{extra:.1f} extra repeats per compare")  # fmt: skip
        for history in (True, False):
            found = unchanged(2, args.families, 500, 7, 0.01, history=history, confirm=True)
            print(f"unchanged 500 points, 7 repeats, 1% run noise, history={history}, confirmed: "
                  f"{100 * found['points slower']:.2f}% of points and {100 * found['exit 1']:.1f}% of compares called "
                  f"slower; exit 3 (undecided after the budget) {100 * found['exit 3']:.1f}%, exit 0 "
                  f"{100 * found['exit 0']:.1f}%")  # fmt: skip
        for confirm in (False, True):
            print(one_kernel_slower(3, args.families, confirm))
    tables = [] if args.quick else [args.only] if args.only else ["lone", "all", "unchanged"]
    if "lone" in tables:
        lone_table(args.families, confirm=False)
        lone_table(args.families, confirm=True)
    if "all" in tables:
        all_changed_table(args.families)
    if "unchanged" in tables:
        unchanged_table(args.families)
    print(f"\n{time.process_time() - started:.0f} CPU s")


if __name__ == "__main__":
    main()
