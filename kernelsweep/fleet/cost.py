"""What a fleet run cost: the hours its Neuron hosts and its CPU (compile farm) hosts spent on it,
per run and per 1,000 points, and an estimate at on-demand prices.

A host's hours on a run are its shards' running time (every attempt counted, from each Running
state to the state after it): a host holds one shard at a time, so that is what the run kept it from
doing anything else. It is not what an instance idling between runs is billed, which no run can see.
The Neuron hours are split into measuring and dead time: an attempt that ended Crashed counts as dead
from its start to when it was declared crashed (its host died somewhere in that span, and the
heartbeat silence before the crash automation acted is pure loss), so a night with a dead host does
not pass for a night of measuring. Prices are per
instance-hour, by the pool a shard ran in (a family, or `compile`); the defaults are the dated table
in docs/fleet.md ("What a run costs", with its source), and KERNELSWEEP_PRICES replaces any of them:
`trn2=44.70,compile=1.428`. A family with no price gets its hours shown and no cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from kernelsweep.errors import UsageError

PRICES_ENV = "KERNELSWEEP_PRICES"
COMPILE = "compile"
PRICE_DATE = "2026-11-26"  # docs/fleet.md's table, and where each figure comes from
# USD per instance-hour, on-demand, Linux, us-east-1; trn2 has no default (docs/fleet.md says why)
DEFAULT_PRICES: dict[str, float] = {"trn1": 21.50, "inf2": 12.98, COMPILE: 1.428}
INSTANCES = {"trn1": "trn1.32xlarge", "trn2": "trn2.48xlarge", "inf2": "inf2.48xlarge", COMPILE: "c7i.8xlarge"}


def parse_prices(text: str | None) -> dict[str, float]:
    """The default table with KERNELSWEEP_PRICES's `pool=USD per hour` entries over it."""
    prices = dict(DEFAULT_PRICES)
    for entry in filter(None, (part.strip() for part in (text or "").split(","))):
        name, _, value = entry.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = math.nan
        if name.strip() not in INSTANCES or not (math.isfinite(price) and price >= 0):
            raise UsageError(
                f"{PRICES_ENV}: bad entry {entry!r}; give POOL=USD per hour with POOL one of "
                f"{', '.join(INSTANCES)}, e.g. trn2=44.70,compile=1.428"
            )
        prices[name.strip()] = price
    return prices


@dataclass(frozen=True)
class RunCost:
    """Seconds of host time by pool (a family, or COMPILE), the points the run measured, and the part of
    each pool's seconds spent in attempts that crashed (`dead`)."""

    seconds: Mapping[str, float]
    points: int
    dead: Mapping[str, float] = field(default_factory=dict)

    @property
    def neuron_hours(self) -> float:
        return sum(s for pool, s in self.seconds.items() if pool != COMPILE) / 3600

    @property
    def neuron_dead_hours(self) -> float:
        return sum(s for pool, s in self.dead.items() if pool != COMPILE) / 3600

    @property
    def cpu_hours(self) -> float:
        return self.seconds.get(COMPILE, 0.0) / 3600

    def per_thousand(self, hours: float) -> float | None:
        return hours / self.points * 1000 if self.points else None

    def cost(self, prices: Mapping[str, float]) -> tuple[float, list[str]]:
        """USD at `prices`, and the pools that had hours but no price (left out of the sum)."""
        priced = sum(s / 3600 * prices[pool] for pool, s in self.seconds.items() if pool in prices)
        return priced, sorted(pool for pool, s in self.seconds.items() if pool not in prices and s > 0)

    def lines(self, prices: Mapping[str, float]) -> list[str]:
        """The summary's cost table (markdown)."""
        usd, unpriced = self.cost(prices)
        rows = [
            ("Neuron-host-hours", self.neuron_hours),
            ("of which measuring", self.neuron_hours - self.neuron_dead_hours),
            ("of which dead (crashed attempts)", self.neuron_dead_hours),
            ("CPU-host-hours (compile farm)", self.cpu_hours),
        ]
        out = ["| | per run | per 1,000 points |", "|---|---|---|"]
        for name, hours in rows:
            out.append(f"| {name} | {hours:.3f} | {_maybe(self.per_thousand(hours), '.3f')} |")
        per = _maybe(usd / self.points * 1000 if self.points else None, ",.2f", "$")
        out.append(f"| estimated cost, on-demand ({PRICE_DATE} prices) | ${usd:,.2f} | {per} |")
        # under the table, not in a cell: the UI never wraps a cell, and this one would widen the table
        if unpriced:
            out += ["", f"The cost is without {', '.join(unpriced)}: no price; set {PRICES_ENV}."]
        return out


def _maybe(value: float | None, spec: str, prefix: str = "") -> str:
    return "-" if value is None else f"{prefix}{value:{spec}}"
