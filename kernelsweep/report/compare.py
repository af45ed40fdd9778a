"""Side A against side B, point by point: two kernels, two runs, or two versions of a tool.

B is always the candidate and A the baseline: speedup = A's latency / B's (above 1, B is faster),
and a regression is B slower than A, or B failing where A ran. Every compared point gets a verdict
from stats (an exact rank test on the repeats' summaries with Holm over the comparison's points,
and a noise floor from the rows themselves); CI reads the exit code (`Comparison.exit_code`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime

from kernelsweep.errors import UsageError
from kernelsweep.report.load import ReportRow, latest
from kernelsweep.report.stats import DEFAULT_ALPHA, Sample, Shift, level, pool, shift, verdicts

TOOL_COLUMNS: dict[str, str] = {
    "compiler": "compiler_version",
    "runtime": "runtime_version",
    "profiler": "profiler_version",
    "nki": "nki_version",
}
REGRESSED = ("slower", "newly failed")
# The compare exit-code contract (docs/reports.md); 2 (usage) comes from the CLI's error boundary.
EXIT_NONE_REGRESSED = 0
EXIT_REGRESSED = 1
EXIT_INCONCLUSIVE = 3
Key = tuple[str, ...]


@dataclass(frozen=True)
class PointComparison:
    key: Key
    a: list[ReportRow]  # this point's rows on side A, newest first (one unless runs are pooled)
    b: list[ReportRow]
    outcome: str  # faster | slower | same | inconclusive | newly failed | fixed | failed in both
    why: str
    shift: Shift | None = None
    a_us: float | None = None  # each side's latency: the median of its pooled rows' medians
    b_us: float | None = None

    @property
    def speedup(self) -> float | None:
        return 1 / self.shift.ratio if self.shift else None


@dataclass(frozen=True)
class Comparison:
    title: str
    a_label: str
    b_label: str
    key_names: tuple[str, ...]
    points: list[PointComparison]
    alpha: float
    only_a: list[Key] = field(default_factory=list)
    only_b: list[Key] = field(default_factory=list)

    @property
    def geomean_speedup(self) -> float | None:
        speedups = [p.speedup for p in self.points if p.speedup]
        return math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None

    def count(self, outcome: str) -> int:
        return sum(p.outcome == outcome for p in self.points)

    @property
    def exit_code(self) -> int:
        if any(p.outcome in REGRESSED for p in self.points):
            return EXIT_REGRESSED
        if self.count("inconclusive"):
            return EXIT_INCONCLUSIVE
        return EXIT_NONE_REGRESSED


def compare_kernels(results: list[ReportRow], a: str, b: str, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """The latest row of each kernel at each (shape, dtype, platform) both were measured at."""
    kernels = sorted({r.kernel for r in results})
    for name in (a, b):
        if name not in kernels:
            raise UsageError(f"kernel {name!r} has no rows here; kernels in these results: {', '.join(kernels)}")
    newest = latest(results)
    side_a: dict[Key, list[ReportRow]] = {r.series[1:]: [r] for r in newest if r.kernel == a}
    side_b: dict[Key, list[ReportRow]] = {r.series[1:]: [r] for r in newest if r.kernel == b}
    if not side_a.keys() & side_b.keys():
        raise UsageError(f"kernels {a} and {b} share no (shape, dtype, platform); compare kernels with the same axes")
    return _compare(f"kernel {b} against kernel {a}", a, b, ("shape", "dtype", "platform"), side_a, side_b, alpha)


def compare_runs(results: list[ReportRow], a: str, b: str, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Two flow runs (ids, unique id prefixes, or `latest` / `previous`), point by point."""
    runs = _runs_newest_first(results)
    run_a, run_b = _resolve_run(runs, a), _resolve_run(runs, b)
    if run_a == run_b:
        raise UsageError(f"--runs {a} {b} name the same flow run {run_a}; give two different runs")
    side_a = _sides(results, lambda r: r.flow_run_id == run_a)
    side_b = _sides(results, lambda r: r.flow_run_id == run_b)
    return _compare(f"run {run_b} against run {run_a}", run_a, run_b, _SERIES, side_a, side_b, alpha)


def compare_versions(results: list[ReportRow], tool: str, a: str, b: str, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Rows made with tool version A against rows made with version B; a version matches itself and
    its longer forms (`2.21` matches `2.21.33363.0+...`). A side pools the point's latest runs."""
    column = TOOL_COLUMNS.get(tool)
    if column is None:
        raise UsageError(f"--versions {tool}: the tool is one of {', '.join(TOOL_COLUMNS)}")
    present = sorted({v for r in results if (v := getattr(r, column))})
    for wanted in (a, b):
        if not any(_version_matches(v, wanted) for v in present):
            listed = ", ".join(present) or "none recorded"
            raise UsageError(f"no rows with {tool} {wanted}; {tool} versions in these results: {listed}")
    both = [v for v in present if _version_matches(v, a) and _version_matches(v, b)]
    if both:
        raise UsageError(f"{tool} {both[0]} matches both {a} and {b}; give versions that tell them apart")
    side_a = _sides(results, lambda r: _version_matches(getattr(r, column), a))
    side_b = _sides(results, lambda r: _version_matches(getattr(r, column), b))
    return _compare(f"{tool} {b} against {tool} {a}", a, b, _SERIES, side_a, side_b, alpha)


_SERIES = ("kernel", "shape", "dtype", "platform")


def _compare(
    title: str,
    a_label: str,
    b_label: str,
    key_names: tuple[str, ...],
    side_a: dict[Key, list[ReportRow]],
    side_b: dict[Key, list[ReportRow]],
    alpha: float,
) -> Comparison:
    shared = sorted(side_a.keys() & side_b.keys())
    if not shared:
        raise UsageError(f"{a_label} and {b_label} have no point in common; nothing to compare")
    points: list[PointComparison] = []
    measured: list[tuple[Key, list[Sample], list[Sample]]] = []
    for key in shared:
        a_rows, b_rows = side_a[key], side_b[key]
        a_ok, b_ok = a_rows[0].ok, b_rows[0].ok  # the newest row of each side decides its status
        if a_ok and b_ok:
            measured.append((key, _pooled(a_rows), _pooled(b_rows)))
            continue
        outcome = "failed in both" if not (a_ok or b_ok) else "fixed" if b_ok else "newly failed"
        failing = b_rows[0] if not b_ok else a_rows[0]
        points.append(PointComparison(key, a_rows, b_rows, outcome, _failure(failing)))
    shifts = [shift(a, b) for _, a, b in measured]
    for (key, a, b), s, (decided, why) in zip(measured, shifts, verdicts(shifts, alpha), strict=True):
        points.append(PointComparison(key, side_a[key], side_b[key], decided, why, s, level(a), level(b)))
    points.sort(key=lambda p: p.key)
    return Comparison(
        title,
        a_label,
        b_label,
        key_names,
        points,
        alpha,
        only_a=sorted(side_a.keys() - side_b.keys()),
        only_b=sorted(side_b.keys() - side_a.keys()),
    )


def _pooled(rows: list[ReportRow]) -> list[Sample]:
    return pool(r.sample() for r in rows if r.ok)


def _sides(results: list[ReportRow], keep: Callable[[ReportRow], bool]) -> dict[Key, list[ReportRow]]:
    sides: dict[Key, list[ReportRow]] = {}
    for r in sorted((r for r in results if keep(r)), key=lambda r: r.order, reverse=True):
        sides.setdefault(r.series, []).append(r)
    return sides


def _failure(row: ReportRow) -> str:
    return f"{row.error_stage or '?'}: {row.error_class or 'failed'}: {row.error_message or ''}".rstrip(": ")


def _version_matches(version: str | None, wanted: str) -> bool:
    if not version:
        return False
    return version == wanted or (version.startswith(wanted) and version[len(wanted)] in ".+-")


def _runs_newest_first(results: list[ReportRow]) -> list[str]:
    started: dict[str, tuple[date, datetime]] = {}
    for r in results:
        if r.flow_run_id and (r.flow_run_id not in started or r.order < started[r.flow_run_id]):
            started[r.flow_run_id] = r.order
    return sorted(started, key=lambda run: started[run], reverse=True)


def _resolve_run(runs: list[str], wanted: str) -> str:
    named = {"latest": 0, "previous": 1}
    if wanted in named:
        if len(runs) <= named[wanted]:
            raise UsageError(f"--runs {wanted}: these results hold {len(runs)} flow run(s)")
        return runs[named[wanted]]
    matches = [run for run in runs if run.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    newest = ", ".join(runs[:5])
    if not matches:
        raise UsageError(f"no flow run {wanted!r} in these results; the newest are: {newest}")
    raise UsageError(f"flow run prefix {wanted!r} matches {len(matches)} runs; give more of the id")
