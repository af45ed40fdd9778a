"""Where a search starts: the configurations the tuned store already found best near its shape.

Stored entries of the same kernel, platform and LNC are ranked by how far their shape lies (octaves,
kernelsweep.tuned.keys.shape_distance), the same dtype before another, a newer SDK before an older;
each gives its best, then its runner-up. Neighbouring shapes of one kernel often share a best, so a
search that measures these first tends to reach a good configuration in a few trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kernelsweep.sweepspec.point import Point
from kernelsweep.tuned.keys import numbers, shape_distance, version_order


def seeds(entries: Sequence[dict[str, Any]], point: Point, count: int) -> list[dict[str, int | str]]:
    """Up to `count` distinct configurations from the entries nearest `point`'s shape."""
    wanted = numbers(point.shape)
    near = []
    for e in entries:
        k = e["key"]
        if (k["kernel"], k["platform"], k.get("lnc")) != (point.kernel, point.platform, point.lnc):
            continue
        distance = shape_distance(numbers(k["shape"]), wanted)
        if math.isfinite(distance):
            near.append((k["dtype"] != point.dtype, distance, e))
    newest_first = sorted(near, key=lambda n: version_order(n[2]["key"]["sdk"].get("compiler")), reverse=True)
    ranked = [e for *_, e in sorted(newest_first, key=lambda n: (n[0], n[1]))]  # stable: newest first on ties
    found: list[dict[str, int | str]] = []
    for e in ranked:
        for config in (e["best"], e.get("runner_up")):
            if config is not None and config["tunables"] not in found and len(found) < count:
                found.append(dict(config["tunables"]))
    return found
