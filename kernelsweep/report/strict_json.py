"""JSON for other programs: strict, so any parser takes it.

Python's `json` writes a float that is not finite as bare `NaN` or `Infinity`, which is not JSON:
strict parsers (jq, JavaScript's JSON.parse, Go, jsonschema validators in other languages) reject the
whole document, and the documented schemas forbid it. A number a computation left undefined (a ratio
of a latency that is NaN, a throughput of an infinite time) is written as null instead.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float (at any depth of dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` of `value` with undefined numbers as null; never bare NaN or Infinity."""
    return json.dumps(finite(value), allow_nan=False, **options)
