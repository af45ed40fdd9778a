"""A kernel block's `where` and `exclude` filters: which combinations of its axes are left out, and why.

`where` is a list of conditions every point must meet, in a small expression language: names (the
block's axes, its tunables, `dtype`, `platform`, `lnc`, `toolchain`), numbers and quoted strings,
arithmetic (`+ - * / // % **`), comparisons (chained too), `and` / `or` / `not`, `in (..)`, and
`min(..)` / `max(..)`. It is parsed and evaluated by simpleeval (never Python's `eval`), after a
check of its own that allows only those constructs and only names the block has, so a typo is a
one-line error before any work, not a point silently kept or dropped.

`exclude` is a table of combinations to leave out: `{ M = 128, N = [4096, 8192] }` drops every point
whose M is 128 and whose N is 4096 or 8192.

A dropped point is no error: expansion counts it under its reason (`Drops`), and `validate` prints
the reasons grouped, with how many points each dropped and an example.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import simpleeval
from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelsweep.errors import UsageError

Value = int | str
FIXED_NAMES = ("dtype", "platform", "lnc", "toolchain")  # names every condition may use beside the axes
FUNCTIONS = {"min": min, "max": max}
_ALLOWED_NODES = (
    ast.Expression, ast.Name, ast.Load, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
    ast.Call, ast.IfExp, ast.Tuple, ast.List, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip


class AxisMatch(BaseModel):
    """One axis of an excluded combination and the values that match it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    axis: str = Field(min_length=1, description="An axis, tunable, or dtype / platform / lnc / toolchain.")
    values: list[Value] = Field(min_length=1, description="The values of that axis the exclusion matches.")


class Exclusion(BaseModel):
    """A combination to leave out: every listed axis has one of its listed values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: list[AxisMatch] = Field(min_length=1, description="The axes and values a dropped point has.")

    @model_validator(mode="before")
    @classmethod
    def _table(cls, data: object) -> object:
        """The spec file writes `{ M = 128, N = [4096, 8192] }`."""
        if isinstance(data, dict) and "match" not in data:
            return {"match": [{"axis": k, "values": v if isinstance(v, list) else [v]} for k, v in data.items()]}
        return data

    def matches(self, values: Mapping[str, Value]) -> bool:
        return all(str(values.get(m.axis)) in {str(v) for v in m.values} for m in self.match)

    def describe(self) -> str:
        return ", ".join(f"{m.axis}={'|'.join(map(str, m.values))}" for m in self.match)


@dataclass(frozen=True)
class Condition:
    """One `where` condition, checked once and parsed once."""

    text: str
    names: frozenset[str]

    @classmethod
    def parse(cls, text: str, allowed: set[str], where: str) -> Condition:
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise UsageError(f"{where} `{text}` is not a condition ({exc.msg}); write e.g. `M * N <= 2**24`") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED_NODES):
                raise UsageError(
                    f"{where} `{text}` uses {type(node).__name__}, which conditions do not allow; use names, "
                    "numbers, strings, arithmetic, comparisons, and/or/not, in (...), min() and max()"
                )
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
                raise UsageError(f"{where} `{text}` calls a function other than min() or max()")
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(FUNCTIONS)
        unknown = sorted(names - allowed)
        if unknown:
            raise UsageError(
                f"{where} `{text}` names {unknown[0]!r}, which this block does not have; "
                f"use one of {', '.join(sorted(allowed))}"
            )
        return cls(text.strip(), frozenset(names))

    @cached_property
    def _parsed(self) -> Any:
        return simpleeval.SimpleEval(functions=FUNCTIONS).parse(self.text)

    def holds(self, values: Mapping[str, Value], where: str) -> bool:
        evaluator = simpleeval.SimpleEval(names=dict(values), functions=FUNCTIONS)
        try:
            return bool(evaluator.eval(self.text, previously_parsed=self._parsed))
        except (simpleeval.InvalidExpression, ArithmeticError, TypeError, ValueError) as exc:
            shown = ", ".join(f"{k}={v}" for k, v in values.items() if k in self.names)
            raise UsageError(
                f"{where} `{self.text}` cannot be evaluated at {shown} ({exc}); fix the condition"
            ) from None


@dataclass(frozen=True)
class Filters:
    """A block's conditions and exclusions, ready to apply to one combination of its names."""

    conditions: tuple[Condition, ...]
    exclusions: tuple[Exclusion, ...]
    where: str  # "spec: kernels[0]", for messages

    @classmethod
    def of(cls, where_texts: list[str], exclude: list[Exclusion], allowed: set[str], where: str) -> Filters:
        conditions = tuple(Condition.parse(t, allowed, f"{where}.where[{i}]") for i, t in enumerate(where_texts))
        for i, exclusion in enumerate(exclude):
            unknown = [m.axis for m in exclusion.match if m.axis not in allowed]
            if unknown:
                raise UsageError(
                    f"{where}.exclude[{i}] names {unknown[0]!r}, which this block does not have; "
                    f"use one of {', '.join(sorted(allowed))}"
                )
        return cls(conditions, tuple(exclude), where)

    def reason(self, values: Mapping[str, Value], known: set[str] | None = None) -> str | None:
        """Why this combination is left out, or None to keep it. With `known`, only the filters whose
        names are all known are applied (a covering array's partial rows, before dtype or platform)."""
        for condition in self.conditions:
            if known is not None and not condition.names <= known:
                continue
            if not condition.holds(values, f"{self.where}.where"):
                return f"where `{condition.text}` is false"
        for exclusion in self.exclusions:
            if known is not None and not {m.axis for m in exclusion.match} <= known:
                continue
            if exclusion.matches(values):
                return f"excluded ({exclusion.describe()})"
        return None


@dataclass
class Drops:
    """Points left out, counted by reason, with the first example of each (what `validate` prints)."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, reason: str, example: str, count: int = 1) -> None:
        self.counts[reason] += count
        self.examples.setdefault(reason, example)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        return [f"{n:>6}  {reason}\n        e.g. {self.examples[reason]}" for reason, n in self.counts.most_common()]
