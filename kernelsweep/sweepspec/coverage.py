"""Which combinations of a kernel block's grid axes a sweep measures: all of them, a covering array, or
a seeded random sample, and what each guarantees.

  full       every combination (the default)
  pairwise   a covering array of strength 2: every pair of values of any two axes appears in at least
             one point; n-wise (`strength = n`) every n-tuple. Built by covertable (greedy, seeded by
             its salt, deterministic for a seed), honouring the block's filters that name only grid
             axes, so no pair is spent on a combination the filters would drop
  random     `budget` distinct combinations drawn uniformly (Python's random.Random(seed)); no tuple
             coverage is guaranteed, and `validate` prints the pairs it happened to cover

The strategy applies to the block's grid axes (shape axes and any tunables swept as a grid); dtypes,
LNC settings, toolchains and platforms are always crossed in full with what it picks, so every picked
combination is compared across all of them.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Combination = dict[str, int | str]
Strategy = Literal["full", "pairwise", "nwise", "random"]
MAX_RANDOM_ATTEMPTS = 50  # draws per wanted point before a sample that filters keep refusing stops


class CoverageSettings(BaseModel):
    """How a block's grid axes are covered."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "10" is not 10

    strategy: Strategy = Field("full", description="full, pairwise, nwise (with strength) or random (with budget).")
    strength: int = Field(2, ge=2, le=6, description="nwise: every combination of this many axes' values appears.")
    budget: int | None = Field(None, ge=1, le=100_000, description="random: how many combinations to draw.")
    seed: int = Field(0, ge=0, description="Seed of the covering array's tie-breaks or the random draw.")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: object) -> object:
        """`coverage = "pairwise"` in the spec file; `"3-wise"` for strength 3."""
        if isinstance(data, str):
            if data.endswith("-wise") and data[:-5].isdigit():
                return {"strategy": "nwise", "strength": int(data[:-5])}
            return {"strategy": data}
        return data

    @model_validator(mode="after")
    def _budget_for_random(self) -> CoverageSettings:
        if self.strategy == "random" and self.budget is None:
            raise ValueError("coverage random needs a budget (how many combinations to draw)")
        if self.strategy != "random" and self.budget is not None:
            raise ValueError(f"coverage {self.strategy} takes no budget; use strategy random for a sample")
        return self

    @property
    def tuple_size(self) -> int:
        return 2 if self.strategy == "pairwise" else self.strength

    def describe(self) -> str:
        if self.strategy == "nwise":
            return f"{self.strength}-wise"
        if self.strategy == "random":
            return f"random (budget {self.budget}, seed {self.seed})"
        return self.strategy


@dataclass(frozen=True)
class Picked:
    """What a strategy picked, and what it guarantees about the grid."""

    combinations: list[Combination]
    grid_size: int
    guarantee: str


def pick(
    settings: CoverageSettings, axes: Mapping[str, Sequence[int | str]], allowed: Callable[[Combination], bool]
) -> Picked:
    """The combinations to measure; `allowed` says whether a combination of all the axes survives the
    block's filters that name only grid axes (the rest are applied to each point afterwards)."""
    size = math.prod(len(v) for v in axes.values())
    if settings.strategy == "full" or (len(axes) < 2 and settings.strategy != "random"):
        return Picked([c for c in _product(axes) if allowed(c)], size, "every combination")
    if settings.strategy == "random":
        drawn = _random(axes, size, settings.budget or 0, settings.seed, allowed)
        covered, total = tuple_coverage(drawn, axes, 2)
        note = f"{covered} of {total} pairs of values happened to be covered" if len(axes) > 1 else "no tuple coverage"
        return Picked(drawn, size, f"no guarantee: {len(drawn)} drawn uniformly (seed {settings.seed}); {note}")
    n = min(settings.tuple_size, len(axes))
    rows = _covering(axes, n, settings.seed, allowed)
    what = "pair" if n == 2 else f"{n}-tuple"
    return Picked(rows, size, f"every {what} of values of any {n} axes appears at least once")


def _product(axes: Mapping[str, Sequence[int | str]]) -> Iterator[Combination]:
    names = list(axes)
    for values in itertools.product(*(axes[a] for a in names)):
        yield dict(zip(names, values, strict=True))


def _covering(
    axes: Mapping[str, Sequence[int | str]], n: int, seed: int, allowed: Callable[[Combination], bool]
) -> list[Combination]:
    from covertable import Controller  # deferred: only covering arrays need it

    names = list(axes)
    check = {"operator": "fn", "requires": names, "evaluate": lambda row: allowed({a: row[a] for a in names})}
    controller = Controller({a: list(axes[a]) for a in names}, strength=n, salt=str(seed), constraints=[check])
    rows = [{a: row[a] for a in names} for row in controller.make()]
    ordered = {tuple(r.values()): r for r in rows}  # each once, in the grid's own order
    position = {a: {v: i for i, v in enumerate(axes[a])} for a in names}
    return [ordered[k] for k in sorted(ordered, key=lambda k: [position[a][v] for a, v in zip(names, k, strict=True)])]


def _random(
    axes: Mapping[str, Sequence[int | str]], size: int, budget: int, seed: int, allowed: Callable[[Combination], bool]
) -> list[Combination]:
    """Distinct combinations by index into the grid (never materialising it), kept if `allowed`."""
    rng, names = random.Random(seed), list(axes)
    seen: set[int] = set()
    kept: list[tuple[int, Combination]] = []
    for _ in range(min(size, budget * MAX_RANDOM_ATTEMPTS)):
        if len(kept) == budget or len(seen) == size:
            break
        index = rng.randrange(size)
        if index in seen:
            continue
        seen.add(index)
        combination = _decode(index, axes, names)
        if allowed(combination):
            kept.append((index, combination))
    return [c for _, c in sorted(kept, key=lambda pair: pair[0])]


def _decode(index: int, axes: Mapping[str, Sequence[int | str]], names: list[str]) -> Combination:
    out: Combination = {}
    for name in reversed(names):
        index, digit = divmod(index, len(axes[name]))
        out[name] = axes[name][digit]
    return {a: out[a] for a in names}


def tuple_coverage(
    rows: Sequence[Mapping[str, int | str]], axes: Mapping[str, Sequence[int | str]], n: int
) -> tuple[int, int]:
    """(n-tuples of values the rows cover, n-tuples the grid has), over every n axes."""
    covered = total = 0
    for group in itertools.combinations(list(axes), n):
        seen = {tuple(row[a] for a in group) for row in rows}
        covered += len(seen)
        total += math.prod(len(axes[a]) for a in group)
    return covered, total
