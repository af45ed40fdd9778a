"""Two configurations of one key measured again side by side: what confirms a new best before it
enters the store, and what the re-check on a new SDK runs for each stored best and its runner-up.

Each round is one ordinary sweep run (its own rows, lineage and journal) holding both configurations
of every key, so they share the run's device, host and run-level noise; the next round lists them in
the other order. The verdict is the report's rule (kernelsweep.report.stats) over every round: each
configuration's rounds are its runs, their levels compared, so the gap's interval carries run-to-run
noise too (the report's best table judges the newest run alone).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kernelsweep.report.best import OUTCOMES, Best, ShapeKey
from kernelsweep.report.load import ReportRow, Selection, load
from kernelsweep.report.stats import Rule, decide, effect
from kernelsweep.results.outcome import SweepOutcome
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.models import SweepSpec

Runner = Callable[[SweepSpec], SweepOutcome]  # the sweep flow, called in a flow or through the CLI's server

ROUNDS = 3  # runs of each pair: with fewer the rule cannot bound the run-to-run noise of a gap
SUFFIX = "-contest"  # the contest runs' sweep name: the spec's own with this suffix


@dataclass(frozen=True)
class Contest:
    """One key's two configurations: the incumbent or challenger first, its opponent second."""

    kernel_ref: str
    params: dict[str, int]
    dtype: str
    platform: str
    lnc: int
    toolchain_name: str
    configs: tuple[dict[str, Any], dict[str, Any]]


def contest_name(sweep: str) -> str:
    return sweep if sweep.endswith(SUFFIX) else sweep + SUFFIX


def contest_spec(base: SweepSpec, contests: Sequence[Contest], platform: str, round_: int) -> SweepSpec:
    """One round's sweep on `platform`: every contest's two configurations, one block each, in the
    order this round takes (even rounds as given, odd rounds reversed)."""
    blocks = []
    for c in (c for c in contests if c.platform == platform):
        for tunables in c.configs if round_ % 2 == 0 else reversed(c.configs):
            blocks.append(
                {
                    "kernel": c.kernel_ref,
                    "dtypes": [c.dtype],
                    "grid": {axis: [value] for axis, value in c.params.items()},
                    "lnc": [c.lnc],
                    "tunables": {name: [value] for name, value in tunables.items()},
                    **({"toolchains": [c.toolchain_name]} if c.toolchain_name else {}),
                }
            )
    data = base.model_dump(mode="json", exclude={"kernels", "name", "platforms"})
    return parse_spec({**data, "name": contest_name(base.name), "platforms": [platform], "kernels": blocks})


def run_contests(base: SweepSpec, contests: Sequence[Contest], run: Runner, rounds: int = ROUNDS) -> list[ReportRow]:
    """Every contest measured `rounds` times (a sweep run per platform and round); their rows."""
    runs = {
        run(contest_spec(base, contests, platform, r)).flow_run_id
        for platform in sorted({c.platform for c in contests})
        for r in range(rounds)
    }
    rows = load(base.results, Selection(sweeps=(contest_name(base.name),)))
    return [r for r in rows if r.flow_run_id in runs]


def contest_bests(rows: Sequence[ReportRow], rule: Rule) -> list[Best]:
    """Each key's two configurations judged over every round, not only the newest (what the report's
    best table does): their run levels side by side, the faster by mean level first, the gap by the
    verdict rule with the family correction over the keys judged."""
    groups: dict[tuple[Any, ...], dict[str, list[ReportRow]]] = {}
    for r in rows:
        at = (r.kernel, r.shape, r.dtype, r.platform, r.lnc, r.toolchain_name or "")
        groups.setdefault(at, {}).setdefault(r.tunables or "", []).append(r)
    found: list[Best] = []
    for configs in groups.values():
        measured = sorted(
            ([r for r in runs if r.ok] for runs in configs.values()),
            key=lambda runs: statistics.fmean(r.sample().level for r in runs) if runs else math.inf,
        )
        first, second = measured[0], (measured[1] if len(measured) > 1 else [])
        if not first:
            continue
        tried, failed = len(configs), sum(not runs for runs in measured)
        if not second:
            found.append(Best(_key(first[0]), _newest(first), tried, failed, None, None))
            continue
        gap = effect(
            [r.sample() for r in first],
            [r.sample() for r in second],
            threshold=rule.threshold_for(first[0].kernel),
            alpha=rule.alpha,
        )
        found.append(Best(_key(first[0]), _newest(first), tried, failed, _newest(second), gap))
    gaps = [(i, b.gap) for i, b in enumerate(found) if b.gap is not None]
    verdicts = decide([gap for _, gap in gaps], rule)
    for (i, _), (verdict, why, _) in zip(gaps, verdicts, strict=True):
        found[i] = replace(found[i], verdict=OUTCOMES[verdict], why=why)
    return found


def _newest(rows: list[ReportRow]) -> ReportRow:
    return max(rows, key=lambda r: r.order)


def _key(r: ReportRow) -> ShapeKey:
    return (r.kernel, r.shape, r.dtype, r.platform, " ".join(p for p in r.variant.split(" ") if p and p != r.tunables))
