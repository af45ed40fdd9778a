"""Control points: kernels named as controls (`compare --control KERNEL`) measure the shift a whole
run took, so it can be taken out of every other point of the run.

A whole run can move at once: another host of the type, a driver, thermals. Every point of B's run
then looks changed by the same amount, and with a history that says runs are quiet, each is called
slower: the false calls come together. A control is a kernel nobody changed between A and B; the
median of its points' changes (B / A, on the log scale) is the run's shared shift, and dividing
every point of the same platform and toolchain by it (the controls' own too: what is left of them
shows how well they agree) leaves the point's own change. The
shift is estimated, not known: its variance (the median's, 1.57 x the points' variance / n) widens
each corrected point's interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from kernelsweep.report.stats import Sample, Spread

MIN_CONTROLS = 3  # fewer control points than this cannot tell a run's shift from one point's
MEDIAN_VARIANCE = math.pi / 2  # the sample median's variance over the mean's, for normal changes


@dataclass(frozen=True)
class RunShift:
    log: float  # the shift B's run took against A's, log(B / A), shared by every point
    variance: float  # the estimate's variance
    points: int  # control points it was measured on

    @property
    def ratio(self) -> float:
        return math.exp(self.log)


def measure(changes: Sequence[float]) -> RunShift | None:
    """The run's shared shift from its control points' log changes (None when too few)."""
    if len(changes) < MIN_CONTROLS:
        return None
    values = np.asarray(changes, dtype=float)
    centre = float(np.median(values))
    scale = float(np.median(np.abs(values - centre))) / 0.6745
    return RunShift(centre, MEDIAN_VARIANCE * scale**2 / len(values), len(values))


def removed(sample: Sample, shift: RunShift) -> Sample:
    """B's run with the shared shift divided out of every repeat."""
    factor = math.exp(-shift.log)
    scaled = {name: getattr(sample, name) * factor for name in ("median", "min", "max")}
    optional = {name: value * factor for name in ("p90", "p99") if (value := getattr(sample, name)) is not None}
    return replace(sample, **scaled, **optional, values=tuple(v * factor for v in sample.values))


def widened(spread: Spread, shift: RunShift) -> Spread:
    """A one-run-a-side spread whose standard error also carries the shift's: se^2 = 2 v + var."""
    if not spread.df:
        return spread
    return Spread(spread.ss + spread.df * shift.variance / 2, spread.df, f"{spread.source}, less the run's shift")
