"""Which engine bounds a point: its profile's engine active times and MBU turned into one answer.

A kernel cannot run faster than its busiest engine is busy: that engine's active time is the floor
under its latency while the others overlap it. The NKI performance guide calls a kernel
compute-bound when one engine is near 100% active and memory-bound when its memory bandwidth
utilisation (MBU) is near 100%. The rule, in order (each threshold a named constant below):

1. An engine (tensor, vector, scalar, gpsimd, or dma) at least SATURATED_PERCENT active bounds the
   point: compute-bound on that engine, memory-bound for dma (the busiest such engine wins).
2. Else MBU at least MEMORY_BOUND_MBU_PERCENT: memory-bound (dma) on HBM bandwidth.
3. Else the busiest engine, when it is at least BUSY_PERCENT active: partly bound by it (it sets
   the floor; the rest of the time it is idle, waiting on the others or on dependencies).
4. Else `overhead`: no engine is busy enough to set the time; launch, synchronisation and
   dependency waits do, and every engine is idle at least 100 - BUSY_PERCENT of the time.

Seed 002 (trn1, Vector Engine 96.45% active) is rule 1 on `vector`; aws-neuron/nki-samples#133's
decode attention (Vector 41.5%, DMA 5.5%, "Vector-bound" by its author) is rule 3 on `vector`;
seed 000's MLP (Tensor 45.74%, DMA 45.20%) is rule 3 on `tensor`, the engine its hand analysis
compares the two MLP kernels by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "BUSY_PERCENT",
    "ENGINES",
    "MEMORY_BOUND_MBU_PERCENT",
    "OVERHEAD",
    "SATURATED_PERCENT",
    "Bound",
    "bounding_engine",
]

SATURATED_PERCENT = 90.0  # "one engine near 100% active" (NKI perf guide), with room for profiler rounding
MEMORY_BOUND_MBU_PERCENT = 60.0  # HBM bandwidth this used is past what real access patterns sustain
BUSY_PERCENT = 40.0  # below this no engine sets the time: nki-samples#133's 41.5% Vector is still "Vector-bound"
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")
OVERHEAD = "overhead"
_NAMES = {
    "tensor": "Tensor Engine",
    "vector": "Vector Engine",
    "scalar": "Scalar Engine",
    "gpsimd": "GpSimd Engine",
    "dma": "DMA",
}


@dataclass(frozen=True)
class Bound:
    """The engine that bounds a point (or `overhead`), how active it was, and why, in one line."""

    engine: str
    active_percent: float  # the bounding engine's; for overhead, the busiest engine's
    why: str


def _percent_field(engine: str) -> str:
    return "dma_active_time_percent" if engine == "dma" else f"{engine}_engine_active_time_percent"


def bounding_engine(values: Mapping[str, int | float | None]) -> Bound | None:
    """The rule above over one normalised profile summary (percents 0-100); None when the profile
    gives no engine's active percent."""
    active = {e: float(v) for e in ENGINES if (v := values.get(_percent_field(e))) is not None}
    if not active:
        return None
    ranked = sorted(active.items(), key=lambda item: item[1], reverse=True)
    busiest, top = ranked[0]
    mbu = values.get("mbu_estimated_percent")
    if top >= SATURATED_PERCENT:
        kind = "memory-bound (DMA)" if busiest == "dma" else f"compute-bound on the {_NAMES[busiest]}"
        return Bound(busiest, top, f"{busiest} {top:.1f}% active (>= {SATURATED_PERCENT:g}%): {kind}")
    if mbu is not None and mbu >= MEMORY_BOUND_MBU_PERCENT:
        dma = active.get("dma")
        shown = f"; dma {dma:.1f}% active" if dma is not None else ""
        why = f"MBU {mbu:.1f}% (>= {MEMORY_BOUND_MBU_PERCENT:g}%): memory-bound on HBM bandwidth{shown}"
        return Bound("dma", dma if dma is not None else float(mbu), why)
    if top >= BUSY_PERCENT:
        following = f"; next {ranked[1][0]} {ranked[1][1]:.1f}%" if len(ranked) > 1 else ""
        why = (
            f"{busiest} {top:.1f}% active, the busiest engine (>= {BUSY_PERCENT:g}%, < {SATURATED_PERCENT:g}%): "
            f"partly bound by the {_NAMES[busiest]}, idle {100 - top:.1f}% of the time{following}"
        )
        return Bound(busiest, top, why)
    why = (
        f"no engine busy (busiest {busiest} {top:.1f}% active, < {BUSY_PERCENT:g}%): overhead, every engine idle "
        f"at least {100 - top:.1f}% of the time (launch, synchronisation, dependency waits)"
    )
    return Bound(OVERHEAD, top, why)
