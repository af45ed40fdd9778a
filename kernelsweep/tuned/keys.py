"""What a tuned configuration is filed under, and the shape arithmetic the lookup needs.

Plain Python only: a model's code imports this through `kernelsweep.tuned` at run time, where
pyarrow, numpy and Prefect have no business being loaded.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

FORMAT_VERSION = 1
SDK_FIELDS = ("compiler", "runtime", "nki")  # the versions a stored best holds for
KEY_FIELDS = ("kernel", "shape", "dtype", "platform", "lnc", "sdk")


def numbers(text: str) -> dict[str, int | str]:
    """`M=512,K=1024` or `tile_m=128,loop_order=mn` as a mapping, numbers as integers."""
    out: dict[str, int | str] = {}
    for term in filter(None, text.split(",")):
        name, _, value = term.partition("=")
        out[name] = int(value) if value.lstrip("-").isdigit() else value
    return out


def shape_text(shape: str | dict[str, Any]) -> str:
    """A shape as the results spell it (`M=512,K=1024,N=2048`), from that text or a mapping."""
    if isinstance(shape, str):
        return shape.replace(" ", "")
    return ",".join(f"{name}={value}" for name, value in shape.items())


def key_id(key: dict[str, Any]) -> str:
    """A stable name for one key (its object name in the store): the hash of its canonical JSON."""
    canonical = json.dumps({f: key.get(f) for f in KEY_FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def shape_distance(a: dict[str, int | str], b: dict[str, int | str]) -> float:
    """How far two shapes of one kernel lie apart: the summed |log2| ratios of their dimensions
    (512 to 1024 is as far as 1024 to 2048); infinite when they do not name the same dimensions."""
    if a.keys() != b.keys():
        return math.inf
    total = 0.0
    for name, x in a.items():
        y = b[name]
        if isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0:
            total += abs(math.log2(x / y))
        elif x != y:
            return math.inf
    return total


def version_order(text: str | None) -> tuple[tuple[int, int | str], ...]:
    """`2.21.0.1234` sorts before `2.22.0`: numbers as numbers (None first)."""
    if not text:
        return ()
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in text.replace("-", ".").split("."))


def _digest(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "seal"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with its seal: the hash of its content, so a hand edit shows (the store is written
    by searches and reports only; a changed number without the measurement behind it is a lie)."""
    return {**entry, "seal": _digest(entry)}


def sealed(entry: dict[str, Any]) -> bool:
    return entry.get("seal") == _digest(entry)
