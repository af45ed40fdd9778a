"""Two configurations of one key measured again side by side: what confirms a new best before it
enters the store, and what the re-check on a new SDK runs for each stored best and its runner-up.

Each round is one ordinary sweep run (its own rows, lineage and journal) holding both configurations
of every key, so they share the run's device, host and run-level noise; the next round lists them in
the other order. The verdict is then the report's (kernelsweep.report.best over the rounds' rows):
each configuration's rounds are its runs, so the gap's interval carries run-to-run noise too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelsweep.report.load import ReportRow, Selection, load
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
