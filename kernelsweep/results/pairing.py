"""A run's kernel rows and their baselines' rows, paired: the kernel's `speedup_vs_baseline`.

A block with a baseline (kernelsweep.baselines) makes two rows per point: the kernel's and its
baseline's (`baseline_of` = the kernel). Once a run's rows are all in, each ok kernel row whose ok
baseline row shares its shape, dtype, platform, LNC and toolchain gets baseline median / kernel median (above 1:
the kernel is faster), both medians the profiler's. The report gives the same ratio with an interval
(kernelsweep.report.speedup); this column is the run's point estimate.
"""

from __future__ import annotations

from dataclasses import replace

from kernelsweep.results.rows import Row
from kernelsweep.results.schema import OK


def pair(rows: list[Row]) -> list[Row]:
    """The rows, with `speedup_vs_baseline` set on each kernel row whose baseline measured."""
    baselines = {
        (r.baseline_of, *_where(r)): r.latency_median_us
        for r in rows
        if r.baseline_of and r.status == OK and r.latency_median_us
    }
    paired = []
    for row in rows:
        baseline_us = baselines.get((row.kernel, *_where(row)))
        if row.baseline_ref and not row.baseline_of and row.status == OK and row.latency_median_us and baseline_us:
            row = replace(row, speedup_vs_baseline=baseline_us / row.latency_median_us)
        paired.append(row)
    return paired


def _where(row: Row) -> tuple[object, ...]:
    """What a kernel row and its baseline's row share (not the kernel's tunables: kernelsweep.baselines)."""
    return (row.shape, row.dtype, row.platform, row.lnc, row.toolchain_name)
