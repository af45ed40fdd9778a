"""The run-to-run noise of a comparison's points: each series' own history with the prior its group
lends it (prior.py), and the shift B's whole run took where control kernels measure it (controls.py).
A group is the points expected to share their noise: one platform, instance type and toolchain."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from kernelsweep.errors import UsageError
from kernelsweep.report import controls, history, prior
from kernelsweep.report.load import ReportRow
from kernelsweep.report.series_query import Results
from kernelsweep.report.stats import Spread

Key = tuple[str, ...]
Group = tuple[str | None, ...]


def run_shifts(
    shared: list[Key], side_a: dict[Key, list[ReportRow]], side_b: dict[Key, list[ReportRow]], control: Sequence[str]
) -> dict[Group, controls.RunShift]:
    """The shift B's run took against A's in each group (platform and toolchain), from the control
    kernels' points there; an unknown control kernel is a usage error."""
    if not control:
        return {}
    kernels = {side_a[key][0].kernel for key in shared}
    unknown = [k for k in control if k not in kernels]
    if unknown:
        raise UsageError(
            f"--control {unknown[0]}: no compared point of that kernel; kernels compared: {', '.join(sorted(kernels))}"
        )
    changes: dict[Group, list[float]] = {}
    for key in shared:
        a, b = side_a[key], side_b[key]
        if a[0].kernel in control and a[0].ok and b[0].ok:
            changes.setdefault(group(b[0]), []).append(math.log(level(b) / level(a)))
    return {name: shift for name, found in changes.items() if (shift := controls.measure(found)) is not None}


def shift_notes(shifts: dict[Group, controls.RunShift], control: Sequence[str]) -> list[str]:
    if not control:
        return []
    if not shifts:
        few = f"fewer than {controls.MIN_CONTROLS} points a platform"
        return [f"control kernel(s) {', '.join(control)}: {few}; no shift removed"]
    return [
        f"B's run on {name[0]} ({name[2]}) took a shift of {shift.ratio - 1:+.1%} on {shift.points} control point(s) "
        f"({', '.join(control)}); it is divided out of every point there"
        for name, shift in shifts.items()
    ]


def moderated(
    shared: list[Key],
    side_a: dict[Key, list[ReportRow]],
    side_b: dict[Key, list[ReportRow]],
    results: Results,
    shifts: dict[Group, controls.RunShift],
) -> dict[tuple[str, ...], Spread]:
    """Each compared series' run-to-run spread: its own history (history.Spreads) with the prior of its
    group (platform and toolchain) added (prior.py); on a first compare, the group's points' changes."""
    used = {r.row_id for rows in (*side_a.values(), *side_b.values()) for r in rows}
    found = history.Spreads(results, used=used)
    newest = {rows[0].series: rows[0] for key in shared for rows in (side_a[key], side_b[key]) if rows[0].ok}
    own = {series: found.of(series) for series in newest}
    group_of = {series: group(row) for series, row in newest.items()}
    priors = prior.group_priors(own, group_of)
    first: dict[Group, list[float]] = {}
    for key in shared:
        a, b = side_a[key], side_b[key]
        if a[0].ok and b[0].ok and len(a) == len(b) == 1 and not own[a[0].series].df and not own[b[0].series].df:
            shift = shifts.get(group(b[0]))
            change = b[0].sample().level - a[0].sample().level - (shift.log if shift else 0.0)
            first.setdefault(group(b[0]), []).append(change)
    for name, changes in first.items():
        if not priors.get(name, Spread()).df:
            priors[name] = prior.from_changes(changes)
    return {series: prior.moderate(spread, priors[group_of[series]]) for series, spread in own.items()}


def group(row: ReportRow) -> Group:
    """Points expected to share their run-to-run noise: one platform, instance type and toolchain."""
    return (row.platform, row.instance_type, row.compiler_version, row.runtime_version)


def level(rows: list[ReportRow]) -> float:
    """A side's latency: its run's median (the geometric mean over several runs)."""
    return math.exp(statistics.fmean(r.sample().level for r in rows if r.ok))
