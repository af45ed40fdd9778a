"""Each kernel against its baseline, shape by shape: the speedup with the verdict machinery's interval.

A kernel block with a baseline (kernelsweep.baselines) writes a `<kernel>.baseline` row next to each
of its rows. The speedup at a point is baseline latency / kernel latency (above 1: the kernel is
faster), judged exactly as `compare --kernels <kernel>.baseline <kernel>` judges B against A: the
runs as the unit, the series' other runs as history, the threshold and the family correction. The
interval of the speedup is that of A / B: the comparison's interval, inverted.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelsweep.errors import UsageError
from kernelsweep.report.compare import compare_kernels
from kernelsweep.report.load import ReportRow
from kernelsweep.report.series_query import Results, as_results
from kernelsweep.report.stats import Rule


@dataclass(frozen=True)
class Speedup:
    kernel: str
    baseline: str  # the baseline's rows' kernel name
    baseline_ref: str | None  # what the spec named (nkilib:module:function)
    shape: str
    dtype: str
    platform: str
    kernel_us: float | None
    baseline_us: float | None
    speedup: float | None
    low: float | None
    high: float | None
    verdict: str  # the kernel against its baseline: faster | slower | same | inconclusive | a status change
    why: str


def speedups(results: Results | list[ReportRow], rule: Rule) -> list[Speedup]:
    """Every (kernel, baseline) pair in `results`' latest rows, at every point both measured."""
    source = as_results(results)
    pairs = sorted({(r.baseline_of, r.kernel, r.baseline_ref) for r in source.latest() if r.baseline_of})
    found: list[Speedup] = []
    for kernel, baseline, reference in pairs:
        try:
            comparison = compare_kernels(source, baseline, kernel, rule)
        except UsageError:  # the kernel's own rows are filtered out, or share no point with the baseline's
            continue
        for p in comparison.points:
            e = p.effect
            found.append(
                Speedup(
                    kernel=kernel,
                    baseline=baseline,
                    baseline_ref=reference,
                    shape=p.key[0],
                    dtype=p.key[1],
                    platform=p.key[2],
                    kernel_us=p.b_us,
                    baseline_us=p.a_us,
                    speedup=1 / e.ratio if e else None,
                    low=1 / e.high if e and e.high else None,
                    high=1 / e.low if e and e.low else None,
                    verdict=p.outcome,
                    why=p.why,
                )
            )
    return found
