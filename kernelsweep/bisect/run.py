"""A bisection of one point, end to end: each run of a position is the point measured through the
sweep's own stages (kernelsweep.bench.measure: the same trace and compile caches, so a build's or a
commit's NEFF is compiled once, by content), stored as a row of the sweep `bisect-<id>`, journaled,
and judged by kernelsweep.bisect.search."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kernelsweep.bisect.axis import Axis
from kernelsweep.bisect.search import Bisection, Outcome, Runs
from kernelsweep.bisect.store import BisectJournal
from kernelsweep.errors import KernelsweepError
from kernelsweep.report.stats import Rule, Sample
from kernelsweep.this_host import Locations

SWEEP_PREFIX = "bisect-"


class BisectFailed(KernelsweepError):
    """A position's point failed: a bisection cannot call it good or bad."""

    stage = "bisect"


@dataclass(frozen=True)
class Question:
    """What is bisected: the point (as `bench` takes it), the axis, the rule and the budget."""

    spec_data: dict[str, Any]  # the one-point spec, as kernelsweep bench builds it
    axis: Axis
    rule: Rule
    max_runs: int

    def as_json(self) -> dict[str, Any]:
        return {
            "point": self.spec_data["kernels"][0] | {"platform": self.spec_data["platforms"][0]},
            "capture": self.spec_data["capture"],
            "toolchain": self.spec_data["toolchain"],
            "axis": {"kind": self.axis.kind, "positions": list(self.axis.labels), "repo": str(self.axis.repo or "")},
            "threshold": self.rule.threshold,
            "alpha": self.rule.alpha,
            "max_runs": self.max_runs,
        }


def bisect(
    question: Question,
    locations: Locations,
    on_run: Callable[[int, Sample], None] | None = None,
) -> tuple[Outcome, BisectJournal, int]:
    """Bisect, resuming the question's journal if it has one: (the outcome, the journal, runs measured now)."""
    from kernelsweep.sweepspec import parse_spec

    spec = parse_spec(question.spec_data, source="bisect")
    journal = BisectJournal(spec.results_location, question.as_json())

    def measure(at: int) -> Sample:
        with question.axis.at(at):
            sample, row_id = _measured(question, journal.id, locations, at)
        journal.add(at, question.axis.labels[at], sample, row_id)
        if on_run:
            on_run(at, sample)
        return sample

    runs = Runs(measure, journal.runs())
    kernel = question.spec_data["kernels"][0]["kernel"]
    outcome = Bisection(len(question.axis.labels), runs, question.rule, kernel, question.max_runs).run()
    journal.finish({"status": outcome.status, "why": outcome.why, "good": outcome.good, "bad": outcome.bad})
    return outcome, journal, runs.measured


def _measured(question: Question, bisect_id: str, locations: Locations, at: int) -> tuple[Sample, str]:
    """One run of the point at this position, stored as a row; its repeats as a sample."""
    from kernelsweep.bench import measure
    from kernelsweep.results import write_results
    from kernelsweep.sweepspec import expand_spec, parse_spec

    spec = parse_spec({**question.spec_data, "name": SWEEP_PREFIX + bisect_id}, source="bisect")
    [point] = expand_spec(spec, source="bisect").points  # within the position: a commit's kernel defaults
    run_id = f"{SWEEP_PREFIX}{bisect_id}-{uuid.uuid4().hex[:12]}"
    row, _, _ = measure(spec, point, locations, run_id)
    lineage = {"sweep": SWEEP_PREFIX + bisect_id, "flow_run_id": run_id, "toolchain": row.toolchain, "points": 1}
    write_results([row], spec.results_location, flow_run_id=run_id, run_date=datetime.now(UTC).date(), lineage=lineage)
    if row.status != "ok" or not row.latencies_us:
        raise BisectFailed(
            f"{question.axis.describe(at)}: the point failed ({row.error_stage}: {row.error_message}); "
            "a bisection needs the point to run at every position"
        )
    return Sample.of(row.latencies_us), row.row_id
