"""The kernel x toolchain x LNC matrix: for each kernel under each SDK and LNC setting, how many of its
points traced, compiled and computed a correct output, and how fast the correct ones ran.

Compiler bugs that appear only at LNC=2 (aws-neuron-sdk#1298, #1352) or only under one SDK show
up as a cell whose `compiled` count falls short where its neighbours' do not. A toolchain is the
row's named toolchain (`[toolchains]`), else its compiler version: two runs with two SDKs form a
matrix too. Cells are per platform: trn2 at its default LNC 2 beside trn1 at its only LNC 1 is two
platforms, not an LNC comparison. Latency is the geometric mean of the correct points' medians, over
the points every cell of the kernel on that platform measured correctly, so cells compare like with like.
"""

from __future__ import annotations

import math
import statistics

from kernelsweep.report.load import ReportRow
from kernelsweep.sim import SIM_VERSION_SUFFIX

FAILED_BEFORE = {"trace": 0, "compile": 1}  # a point failing at this stage got no further
Cell = str | int | float | None


def toolchain_of(r: ReportRow) -> str:
    return r.toolchain_name or (r.compiler_version or "unknown").replace(SIM_VERSION_SUFFIX, "")


def matrix_rows(latest: list[ReportRow]) -> list[dict[str, Cell]]:
    """One row per kernel x platform x toolchain x LNC, with the counts as `n/N`; empty when no kernel
    ran under more than one toolchain or LNC on one platform (the latest-results table says it all)."""
    cells: dict[tuple[str, str, str, int], list[ReportRow]] = {}
    for r in latest:
        cells.setdefault((r.kernel, r.platform, toolchain_of(r), r.lnc or 1), []).append(r)
    where = [(k, p) for k, p, _, _ in cells]
    if all(where.count(w) < 2 for w in where):
        return []
    return [_row(key, cells[key], _common(cells, key[:2])) for key in sorted(cells)]


def _common(
    cells: dict[tuple[str, str, str, int], list[ReportRow]], where: tuple[str, str]
) -> set[tuple[str, str, str]]:
    """The (shape, dtype, tunables) every cell of the kernel on the platform measured correctly."""
    measured = [{_point(r) for r in rows if r.ok} for key, rows in cells.items() if key[:2] == where]
    return set.intersection(*measured) if measured else set()


def _point(r: ReportRow) -> tuple[str, str, str]:
    return (r.shape, r.dtype, r.tunables or "")


def _row(key: tuple[str, str, str, int], rows: list[ReportRow], common: set[tuple[str, str, str]]) -> dict[str, Cell]:
    kernel, platform, toolchain, lnc = key
    total = len(rows)
    stage = [FAILED_BEFORE.get(r.error_stage or "", 2) if r.status == "failed" else 2 for r in rows]
    shared = [r.latency_us for r in rows if r.ok and _point(r) in common and r.latency_us]
    return {
        "kernel": kernel,
        "platform": platform,
        "toolchain": toolchain,
        "lnc": lnc,
        "points": total,
        "traced": f"{sum(s > 0 for s in stage)}/{total}",
        "compiled": f"{sum(s > 1 for s in stage)}/{total}",
        "correct": f"{sum(r.ok and r.correct is not False for r in rows)}/{total}",
        "geomean_median_us": round(math.exp(statistics.fmean(map(math.log, shared))), 3) if shared else None,
        "over_points": len(shared),
    }
