"""Side A against side B, point by point: two kernels, two runs, or two versions of a tool.

B is always the candidate and A the baseline: the change is B / A (above 1, B is slower), and a
regression is B slower than A, or B failing or computing wrong where A was right. Every measured
point gets an interval and a verdict from stats (a threshold that matters, a family correction over
the points tested, the run as the unit of replication with the series' other runs as history); CI
reads the exit code (`Comparison.exit_code`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtrit

from kernelsweep.errors import UsageError
from kernelsweep.report import controls, run_noise
from kernelsweep.report.load import ReportRow
from kernelsweep.report.ranks import reach_warning
from kernelsweep.report.series_query import SIDE_RUNS, Results, as_results
from kernelsweep.report.stats import Effect, Rule, decide, effect, ratio_of, suspected
from kernelsweep.sweepspec.shapes import natural_order

TOOL_COLUMNS: dict[str, str] = {
    "compiler": "compiler_version",
    "runtime": "runtime_version",
    "profiler": "profiler_version",
    "nki": "nki_version",
}
REGRESSED = ("slower", "newly failed", "newly incorrect")
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
    outcome: str  # faster | slower | same | inconclusive | newly failed | newly incorrect | fixed | failed in both
    why: str
    effect: Effect | None = None
    adjusted_p: float | None = None
    suspect: bool = False  # inconclusive, but its own interval leans beyond +threshold: what exit 3 means
    a_us: float | None = None  # each side's latency: its run's median (geometric mean over several runs)
    b_us: float | None = None

    @property
    def kernel(self) -> str:
        return self.a[0].kernel if self.a else self.key[0]

    @property
    def bound(self) -> str | None:
        """Why B's newest row runs as it does: the engine that bounds it, in one line."""
        return self.b[0].bound_why if self.b else None


@dataclass(frozen=True)
class Comparison:
    title: str
    a_label: str
    b_label: str
    key_names: tuple[str, ...]
    points: list[PointComparison]
    rule: Rule
    only_a: list[Key] = field(default_factory=list)
    only_b: list[Key] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the reader must know about how it was decided
    metric: str = "latency"  # what a_us / b_us hold (kernelsweep.report.measures), in `unit`
    unit: str = "us"

    @property
    def measured(self) -> list[PointComparison]:
        return [p for p in self.points if p.effect is not None]

    @property
    def method(self) -> str:
        return self.rule.describe(len(self.measured))

    def geomeans(self) -> dict[str, tuple[float, float, float]]:
        """Per kernel: the geometric mean of B / A over its measured points, with its interval."""
        out = {}
        for kernel in sorted({p.kernel for p in self.measured}):
            mean = geometric_mean([p.effect for p in self.measured if p.kernel == kernel and p.effect], self.rule.alpha)
            if mean:
                out[kernel] = mean
        return out

    def count(self, outcome: str) -> int:
        return sum(p.outcome == outcome for p in self.points)

    @property
    def exit_code(self) -> int:
        if any(p.outcome in REGRESSED for p in self.points):
            return EXIT_REGRESSED
        if any(p.suspect for p in self.points):
            return EXIT_INCONCLUSIVE
        return EXIT_NONE_REGRESSED


def compare_kernels(results: Results | list[ReportRow], a: str, b: str, rule: Rule | None = None) -> Comparison:
    """The latest row of each kernel at each (shape, dtype, platform) both were measured at."""
    source = as_results(results)
    kernels = source.kernels()
    for name in (a, b):
        if name not in kernels:
            raise UsageError(f"kernel {name!r} has no rows here; kernels in these results: {', '.join(kernels)}")
    newest = source.latest()
    side_a: dict[Key, list[ReportRow]] = {r.series[1:]: [r] for r in newest if r.kernel == a}
    side_b: dict[Key, list[ReportRow]] = {r.series[1:]: [r] for r in newest if r.kernel == b}
    if not side_a.keys() & side_b.keys():
        raise UsageError(f"kernels {a} and {b} share no (shape, dtype, platform); compare kernels with the same axes")
    title = f"kernel {b} against kernel {a}"
    return _compare(title, a, b, ("shape", "dtype", "platform", "variant"), side_a, side_b, source, rule or Rule())


def compare_runs(
    results: Results | list[ReportRow], a: str, b: str, rule: Rule | None = None, control: Sequence[str] = ()
) -> Comparison:
    """Two flow runs (ids, unique id prefixes, or `latest` / `previous`), point by point."""
    source = as_results(results)
    runs = source.runs_newest_first()
    run_a, run_b = _resolve_run(runs, a), _resolve_run(runs, b)
    if run_a == run_b:
        raise UsageError(f"--runs {a} {b} name the same flow run {run_a}; give two different runs")
    side_a = _sides(source.select("flow_run_id", lambda run: run == run_a))
    side_b = _sides(source.select("flow_run_id", lambda run: run == run_b))
    title = f"run {run_b} against run {run_a}"
    return _compare(title, run_a, run_b, _SERIES, side_a, side_b, source, rule or Rule(), control)


def compare_versions(
    results: Results | list[ReportRow], tool: str, a: str, b: str, rule: Rule | None = None, control: Sequence[str] = ()
) -> Comparison:
    """Rows made with tool version A against rows made with version B; a version matches itself and
    its longer forms (`2.21` matches `2.21.33363.0+...`). A side holds the point's runs with it (its
    newest `SIDE_RUNS`: a month of nights describes a version; a year would only cost memory)."""
    column = TOOL_COLUMNS.get(tool)
    if column is None:
        raise UsageError(f"--versions {tool}: the tool is one of {', '.join(TOOL_COLUMNS)}")
    source = as_results(results)
    present = source.values(column)
    for wanted in (a, b):
        if not any(_version_matches(v, wanted) for v in present):
            listed = ", ".join(present) or "none recorded"
            raise UsageError(f"no rows with {tool} {wanted}; {tool} versions in these results: {listed}")
    both = [v for v in present if _version_matches(v, a) and _version_matches(v, b)]
    if both:
        raise UsageError(f"{tool} {both[0]} matches both {a} and {b}; give versions that tell them apart")
    side_a = _sides(source.select(column, lambda v: _version_matches(v, a), newest=SIDE_RUNS), across_toolchains=True)
    side_b = _sides(source.select(column, lambda v: _version_matches(v, b), newest=SIDE_RUNS), across_toolchains=True)
    title = f"{tool} {b} against {tool} {a}"
    return _compare(title, a, b, _SERIES, side_a, side_b, source, rule or Rule(), control)


_SERIES = ("kernel", "shape", "dtype", "platform", "variant")


def _compare(
    title: str,
    a_label: str,
    b_label: str,
    key_names: tuple[str, ...],
    side_a: dict[Key, list[ReportRow]],
    side_b: dict[Key, list[ReportRow]],
    results: Results,
    rule: Rule,
    control: Sequence[str] = (),
) -> Comparison:
    if len({key[-1] for key in side_a.keys() | side_b.keys()}) <= 1:  # one variant: no variant column
        key_names, side_a, side_b = key_names[:-1], _without_variant(side_a), _without_variant(side_b)
    shared = sorted(side_a.keys() & side_b.keys(), key=natural_order)
    if not shared:
        raise UsageError(f"{a_label} and {b_label} have no point in common; nothing to compare")
    shifts = run_noise.run_shifts(shared, side_a, side_b, control)
    spreads = run_noise.moderated(shared, side_a, side_b, results, shifts)
    points: list[PointComparison] = []
    measured: list[tuple[Key, Effect]] = []
    for key in shared:
        a_rows, b_rows = side_a[key], side_b[key]
        a_ok, b_ok = a_rows[0].ok, b_rows[0].ok  # the newest row of each side decides its status
        if a_ok and b_ok:
            a_runs, b_runs = [r for r in a_rows if r.ok], [r for r in b_rows if r.ok]
            spread_a, spread_b = spreads[a_rows[0].series], spreads[b_rows[0].series]
            b_samples = [r.sample() for r in b_runs]
            shift = shifts.get(run_noise.group(b_rows[0]))  # the controls' own points too: what is left of them
            if shift is not None:
                b_samples = [controls.removed(s, shift) for s in b_samples]
                widened = controls.widened(spread_a, shift)
                spread_a, spread_b = widened, widened if spread_b is spread_a else controls.widened(spread_b, shift)
            found = effect(
                [r.sample() for r in a_runs],
                b_samples,
                threshold=rule.threshold_for(a_rows[0].kernel),
                alpha=rule.alpha,
                spread_a=spread_a,
                spread_b=spread_b,
            )
            measured.append((key, found))
            continue
        points.append(PointComparison(key, a_rows, b_rows, *_status_change(a_rows[0], b_rows[0])))
    for (key, _), judged in zip(measured, judge([e for _, e in measured], rule), strict=True):
        a_rows, b_rows = side_a[key], side_b[key]
        points.append(PointComparison(key, a_rows, b_rows, *judged, run_noise.level(a_rows), run_noise.level(b_rows)))
    points.sort(key=lambda p: natural_order(p.key))
    return Comparison(
        title,
        a_label,
        b_label,
        key_names,
        points,
        rule,
        only_a=sorted(side_a.keys() - side_b.keys(), key=natural_order),
        only_b=sorted(side_b.keys() - side_a.keys(), key=natural_order),
        notes=_notes([e for _, e in measured], rule) + run_noise.shift_notes(shifts, control),
    )


UNKNOWN_NOISE = "one run a side cannot tell a run's shift from a change"


def judge(effects: list[Effect], rule: Rule) -> list[tuple[str, str, Effect, float, bool]]:
    """(outcome, why, effect, adjusted p, suspect) of each measured point: the family's verdicts, with
    none claimed slower or same on a noise no run showed (a first compare too small to lend one)."""
    judged: list[tuple[str, str, Effect, float, bool]] = []
    for found, (decided, why, q) in zip(effects, decide(effects, rule), strict=True):
        if decided in ("slower", "same") and "run-to-run noise unknown" in found.method:
            decided, why = "inconclusive", f"{why}, but the run-to-run noise is unknown: {UNKNOWN_NOISE}"
        judged.append((decided, why, found, q, decided == "inconclusive" and suspected(found, rule.alpha)))
    return judged


def _status_change(a: ReportRow, b: ReportRow) -> tuple[str, str]:
    """(outcome, why) where the newest row of a side did not measure a correct result."""
    if a.ok:
        return ("newly incorrect" if b.incorrect else "newly failed"), _failure(b)
    if b.ok:
        return "fixed", f"A: {_failure(a)}"
    return "failed in both", _failure(b)


def _notes(effects: list[Effect], rule: Rule) -> list[str]:
    """Up-front facts about the comparison: what cannot be decided, and on what the intervals rest."""
    notes = []
    one_run = [e for e in effects if e.runs == (1, 1) and "run-to-run noise unknown" in e.method]  # ranks only
    if one_run:
        fewest = min(min(e.repeats) for e in one_run)
        warning = reach_warning(fewest, len(effects), rule.alpha)
        if warning:
            notes.append(warning)
    unknown = sum("run-to-run noise unknown" in e.method for e in effects)
    if unknown:
        notes.append(
            f"{unknown} point(s) have no other runs to show their run-to-run noise, and too few points share "
            f"their platform and toolchain to lend it: their intervals cover the repeats only, and {UNKNOWN_NOISE}, "
            "so none is called slower or same"
        )
    lent = sum("points' changes around no change" in e.method for e in effects)
    if lent:
        notes.append(
            f"{lent} point(s) are compared for the first time: their run-to-run noise is the spread of the compared "
            "points' changes (a shift the whole run took counts as noise, not as a change)"
        )
    bounded = sum("summaries" in e.method for e in effects)
    if bounded:
        notes.append(
            f"{bounded} point(s) compare rows written before schema 2 (no raw repeats): their intervals are the "
            "conservative bound the five summary values prove"
        )
    return notes


def geometric_mean(effects: Sequence[Effect], alpha: float) -> tuple[float, float, float] | None:
    """(geometric mean of the ratios, low, high): t over the points' log ratios, widened in quadrature
    by the median point's own standard error (a run's shift is shared by all its points, so it does
    not average out over them)."""
    if len(effects) < 2:
        return (effects[0].ratio, effects[0].low, effects[0].high) if effects else None
    logs = np.log([e.ratio for e in effects])
    centre = float(logs.mean())
    own = [e.se for e in effects if math.isfinite(e.se)]
    shared = float(np.median(own)) if own else 0.0
    t = float(stdtrit(len(logs) - 1, 1 - alpha))
    half = t * math.hypot(math.sqrt(float(logs.var(ddof=1)) / len(logs)), shared)
    return ratio_of(centre), ratio_of(centre - half), ratio_of(centre + half)


def _sides(newest_first: list[ReportRow], across_toolchains: bool = False) -> dict[Key, list[ReportRow]]:
    """The rows by series, newest first; `across_toolchains` pairs two named toolchains' rows of a point
    (a version comparison from one run that swept both)."""
    sides: dict[Key, list[ReportRow]] = {}
    for r in newest_first:
        key = (*r.series[:4], r.variant_across_toolchains) if across_toolchains else r.series
        sides.setdefault(key, []).append(r)
    return sides


def _without_variant(side: dict[Key, list[ReportRow]]) -> dict[Key, list[ReportRow]]:
    return {key[:-1]: rows for key, rows in side.items()}


def _failure(row: ReportRow) -> str:
    return f"{row.error_stage or '?'}: {row.error_class or 'failed'}: {row.error_message or ''}".rstrip(": ")


def _version_matches(version: str | None, wanted: str) -> bool:
    if not version:
        return False
    return version == wanted or (version.startswith(wanted) and version[len(wanted)] in ".+-")


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
