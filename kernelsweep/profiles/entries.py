"""One logical core's figures from a profile with several summary entries.

At LNC=2 a logical core is two physical cores running side by side, and a profile may hold one
summary entry per physical core (`doctor --smoke` counts them on a real host; the simulator writes
one per core, so this path is exercised by default). A row must describe the whole logical core,
so entries are combined field by field, after each is normalised (microseconds, 0-100 percents):

* times and cycle counts: the max, the cores run at once and the slower one ends the execution;
* counters (FLOPs, bytes, instructions, transfers): the sum, each core counts its own work;
* the NEFF's tensor sizes (`*_size_bytes`): the max, both cores run one NEFF;
* an engine's or the DMA's active percent: recomputed from the combined times, so it stays
  `active time / total time`;
* `mm_arithmetic_intensity`: recomputed from the summed FLOPs and HBM bytes, as the schema defines it;
* `mbu_estimated_percent`: the sum, since the schema relates it to ONE HBM stack's bandwidth "for LNC1
  and LNC2" alike, so the logical core's MBU is the cores' bytes over that one stack;
* the profiler's other percents (MFU, HFU, their ceilings): the mean, since each core's MFU is
  relative to its own TensorE, and the logical core has one per physical core
  (`hw_mfu_percent`, computed from the summed FLOPs, does not depend on this choice);
* `peak_flops_bandwidth_ratio`: the first entry's, a property of the hardware;
* any other number: the mean for floats, the sum for integers.
One entry is returned as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import fmean

Value = int | float | None
Values = dict[str, Value]

_PAIRS = (
    *((f"{e}_engine_active_time_us", f"{e}_engine_active_time_percent") for e in ("tensor", "vector", "scalar",
                                                                                  "sync", "gpsimd")),
    ("dma_active_time_us", "dma_active_time_percent"),
    ("total_active_time_us", "total_active_time_percent"),
)  # fmt: skip


def _sum(values: list[int | float]) -> int | float:
    return sum(values)


def _first(values: list[int | float]) -> int | float:
    return values[0]


def _rule(name: str, integer: bool) -> Callable[[list[int | float]], int | float]:
    if name.endswith(("_us", "cycle_count", "_cycles")):
        return max
    if name.endswith("_size_bytes"):
        return max
    if name == "peak_flops_bandwidth_ratio":
        return _first
    if name == "mbu_estimated_percent":
        return _sum
    if name.endswith("_percent") or not integer:
        return fmean
    return _sum


def combine(entries: Sequence[Values], integers: frozenset[str]) -> Values:
    """The entries' values as one logical core's (rules in the module docstring)."""
    if len(entries) == 1:
        return dict(entries[0])
    names = list(dict.fromkeys(name for entry in entries for name in entry))
    out: Values = {}
    for name in names:
        present = [value for entry in entries if (value := entry.get(name)) is not None]
        integer = name in integers or all(isinstance(v, int) for v in present)
        out[name] = _rule(name, integer)(present) if present else None
    _recompute(out)
    return out


def _recompute(out: Values) -> None:
    total = out.get("total_time_us")
    for time_name, percent_name in _PAIRS:
        part = out.get(time_name)
        if total and part is not None and percent_name in out:
            out[percent_name] = 100 * part / total
    hardware, read, write = (out.get(n) for n in ("hardware_flops", "hbm_read_bytes", "hbm_write_bytes"))
    if "mm_arithmetic_intensity" in out and hardware is not None and read is not None and write is not None:
        moved = read + write
        if moved:
            out["mm_arithmetic_intensity"] = (hardware - (out.get("transpose_flops") or 0)) / moved
