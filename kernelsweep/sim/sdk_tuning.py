"""A simulated SDK change that moves a tuned best: the code the simulated compiler emits for some
configurations runs faster from one release on, so a stored best can go stale with the SDK (what
`kernelsweep tuned recheck` is for; docs/tuning.md).

The rule, deterministic and the only one: from compiler 2.22 on, the matmul in loop order `mn` (its
default) at N >= 2048 runs at 0.7x the time, as if the newer compiler streamed its wide N tiles
better. At M=512, K=1024, N=2048 that makes `mn` beat the `nm` order that was best on 2.21; at
M=2048 the gap was wider and `nm` stays best; shapes with N < 2048 do not change.
"""

from __future__ import annotations

from collections.abc import Mapping

FROM_RELEASE = (2, 22)
FACTOR = 0.7
MIN_N = 2048


def sdk_code_factor(
    compiler_version: str, kernel: str, params: Mapping[str, int], tunables: Mapping[str, object]
) -> float:
    """How much faster (below 1) the code this compiler emits for the point runs, by the rule above."""
    try:
        release = tuple(int(p) for p in compiler_version.split("+")[0].split(".")[:2])
    except ValueError:
        return 1.0
    applies = (
        release >= FROM_RELEASE
        and kernel == "matmul"
        and params.get("N", 0) >= MIN_N
        and tunables.get("loop_order", "mn") == "mn"
    )
    return FACTOR if applies else 1.0
