"""A bisection of one point, end to end: each run of a position is the point measured through the
sweep's own stages (kernelsweep.bench.measure: the same trace and compile caches, so a build's or a
commit's NEFF is compiled once, by content), stored as a row of the sweep `bisect-<id>`, journaled,
and judged by kernelsweep.bisect.search. Given a `compile_first` (the bisect flow's compile farm), a
position whose build a compile host can take (SDK builds: kernelsweep.bisect.axis.Axis.build_env) has
its NEFF compiled there before its first run, which then finds it in the store. With interleaved
rounds, a round is the positions' NEFFs (fetched from their first runs' rows, as `compare --confirm`
fetches a suspect's) captured in turn on one leased core of one toolchain set-up, each round journaled
as it is captured."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelsweep.bisect.axis import Axis
from kernelsweep.bisect.search import Bisection, Line, Outcome, Rounds, Runs, capture_order
from kernelsweep.bisect.store import SWEEP_PREFIX, BisectJournal
from kernelsweep.errors import KernelsweepError
from kernelsweep.report.stats import Rule, Sample
from kernelsweep.this_host import Locations

if TYPE_CHECKING:
    from kernelsweep.sweepspec import Point, SweepSpec

# Has a step's NEFF compiled elsewhere (spec, point, the build as the tools' variables) before it is measured
CompileFirst = Callable[["SweepSpec", "Point", dict[str, str]], None]


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
    other: Axis | None = None  # a second axis (kernel commits beside SDK builds): bisect_both
    rounds: int = 0  # decide on up to this many interleaved rounds a judgement (0: on runs)

    def as_json(self) -> dict[str, Any]:
        other = {"other": _axis_json(self.other)} if self.other else {}
        rounds = {"rounds": self.rounds} if self.rounds else {}  # absent on runs: older journals keep their ids
        return {
            "point": self.spec_data["kernels"][0] | {"platform": self.spec_data["platforms"][0]},
            "capture": self.spec_data["capture"],
            "toolchain": self.spec_data["toolchain"],
            "axis": _axis_json(self.axis),
            **other,
            **rounds,
            "threshold": self.rule.threshold,
            "alpha": self.rule.alpha,
            "max_runs": self.max_runs,
        }


def _axis_json(axis: Axis) -> dict[str, Any]:
    pythons = {"pythons": list(axis.pythons)} if axis.pythons else {}  # SDK environments: which venvs
    return {"kind": axis.kind, "positions": list(axis.labels), "repo": str(axis.repo or ""), **pythons}


@dataclass(frozen=True)
class Both:
    """Two axes bisected: each one's outcome, its ends the good corner against the corner with only
    that axis at its bad end (`same`: the culprit is not on it)."""

    first: Outcome  # along the question's axis, the other at its good end
    second: Outcome  # along its other axis, the first at its good end


def bisect(
    question: Question,
    locations: Locations,
    on_run: Callable[[Any, Sample], None] | None = None,
    compile_first: CompileFirst | None = None,
) -> tuple[Outcome, BisectJournal, int]:
    """Bisect, resuming the question's journal if it has one: (the outcome, the journal, runs measured now)."""
    journal, runs = _journaled_runs(question, locations, on_run, compile_first)
    outcome = _along(question, question.axis, runs).run()
    journal.finish(_summary(outcome))
    return outcome, journal, runs.measured


def bisect_both(
    question: Question,
    locations: Locations,
    on_run: Callable[[Any, Sample], None] | None = None,
) -> tuple[Both, BisectJournal, int]:
    """Two axes (`question.axis` and `question.other`): the two corners first, each against the good
    corner, to say which axis holds a culprit; then each axis that does, bisected with the other at its
    good end. Positions are (first, second) index pairs; the journal resumes it as it does one axis."""
    assert question.other is not None
    journal, runs = _journaled_runs(question, locations, on_run)
    first = _along(question, question.axis, Line(runs, lambda i: (i, 0)))
    second = _along(question, question.other, Line(runs, lambda j: (0, j)))
    corners = first.ends(), second.ends()  # which axis holds the culprit, before either is narrowed
    both = Both(first.narrow(corners[0]), second.narrow(corners[1]))
    journal.finish({"first": _summary(both.first), "second": _summary(both.second)})
    return both, journal, runs.measured


def _journaled_runs(
    question: Question,
    locations: Locations,
    on_run: Callable[[Any, Sample], None] | None,
    compile_first: CompileFirst | None = None,
) -> tuple[BisectJournal, Runs]:
    """The question's journal, and its runs: replayed from the journal, else measured, stored and journaled."""
    from kernelsweep.sweepspec import parse_spec

    spec = parse_spec(question.spec_data, source="bisect")
    journal = BisectJournal(spec.results_location, question.as_json())
    compiled = set(journal.runs())  # positions measured before: their NEFFs are in the store

    def measure(at: Any) -> Sample:
        build = question.axis.build_env(at) if question.other is None else None  # two axes: a commit's too
        if compile_first is not None and build is not None and at not in compiled:
            # before the position is in effect here: its build travels in `build`, not in this process
            compile_first(*_step(question, at, journal.id), build)
            compiled.add(at)
        with _positioned(question, at):
            sample, row_id = _measured(question, at, journal.id, locations)
        journal.add(at, _label(question, at), sample, row_id)
        if on_run:
            on_run(at, sample)
        return sample

    def capture(key: Rounds, start: int, count: int) -> Iterator[tuple[float, ...]]:
        for latencies in _interleaved(question, journal, locations, key, start, count):
            journal.add_round(key, latencies)
            if on_run:
                on_run(key, Sample.of(latencies))
            yield latencies

    return journal, Runs(measure, journal.runs(), capture=capture, journaled_rounds=journal.rounds())


def _interleaved(
    question: Question, journal: BisectJournal, locations: Locations, key: Rounds, start: int, count: int
) -> Iterator[tuple[float, ...]]:
    """Rounds `start` .. `start` + `count` - 1 of these positions' NEFFs on one leased core, in the
    search's capture order; each round's latencies in the positions' order."""
    from kernelsweep.this_host.confirm import Interleaved, context_for, fetch

    results = question.spec_data["results"]
    # the good end's position in effect: the simulator's capture imports the kernel's module (a commit's
    # only in its checkout) to compute the outputs; the latencies are the NEFFs' own
    with _positioned(question, key[0]), tempfile.TemporaryDirectory(prefix="kernelsweep-bisect-rounds-") as tmp:
        sides = [fetch(results, journal.row_of(at), Path(tmp) / f"side-{i}") for i, at in enumerate(key)]
        pairs = list(zip(sides, sides[1:], strict=False))
        ctx = context_for(pairs, question.spec_data["toolchain"], locations, "bisect --rounds")
        one = Interleaved(ctx, sides[0], sides[-1], Path(tmp) / "captures")
        with one:  # the core leased for the rounds
            for number in range(start, start + count):
                latencies = {i: one.capture(sides[i]) for i in capture_order(number, len(sides))}
                yield tuple(latencies[i] for i in range(len(sides)))


def _along(question: Question, axis: Axis, runs: Runs | Line) -> Bisection:
    kernel = question.spec_data["kernels"][0]["kernel"]
    return Bisection(len(axis.labels), runs, question.rule, kernel, question.max_runs, question.rounds)


def _summary(outcome: Outcome) -> dict[str, Any]:
    return {"status": outcome.status, "why": outcome.why, "good": outcome.good, "bad": outcome.bad}


@contextmanager
def _positioned(question: Question, at: Any) -> Iterator[None]:
    """The position in effect: one axis's, or both axes' (a build and a commit) at once."""
    if question.other is None:
        with question.axis.at(at):
            yield
    else:
        with question.axis.at(at[0]), question.other.at(at[1]):
            yield


def _label(question: Question, at: Any) -> str:
    if question.other is None:
        return question.axis.labels[at]
    return f"{question.axis.labels[at[0]]} x {question.other.labels[at[1]]}"


def _described(question: Question, at: Any) -> str:
    if question.other is None:
        return question.axis.describe(at)
    return f"{question.axis.describe(at[0])} x {question.other.describe(at[1])}"


def _spec_at(question: Question, at: Any) -> dict[str, str]:
    """What the position sets in the point's spec (an SDK environment's interpreter), on either axis."""
    if question.other is None:
        return question.axis.spec_of(at)
    return question.axis.spec_of(at[0]) | question.other.spec_of(at[1])


def _measured(question: Question, at: Any, bisect_id: str, locations: Locations) -> tuple[Sample, str]:
    """One run of the point at this position, stored as a row; its repeats as a sample."""
    from kernelsweep.bench import measure
    from kernelsweep.results import write_results

    where = _described(question, at)
    spec, point = _step(question, at, bisect_id)
    run_id = f"{SWEEP_PREFIX}{bisect_id}-{uuid.uuid4().hex[:12]}"
    row, _, _ = measure(spec, point, locations, run_id)
    lineage = {"sweep": SWEEP_PREFIX + bisect_id, "flow_run_id": run_id, "toolchain": row.toolchain, "points": 1}
    write_results([row], spec.results_location, flow_run_id=run_id, run_date=datetime.now(UTC).date(), lineage=lineage)
    if row.status != "ok" or not row.latencies_us:
        raise BisectFailed(
            f"{where}: the point failed ({row.error_stage}: {row.error_message}); "
            "a bisection needs the point to run at every position"
        )
    return Sample.of(row.latencies_us), row.row_id


def _step(question: Question, at: Any, bisect_id: str) -> tuple[SweepSpec, Point]:
    """The spec and the one point a run of this position measures (expanded within the position when it
    is in effect: a commit's kernel defaults)."""
    from kernelsweep.sweepspec import expand_spec, parse_spec

    data = {**question.spec_data, **_spec_at(question, at), "name": SWEEP_PREFIX + bisect_id}
    spec = parse_spec(data, source="bisect")
    [point] = expand_spec(spec, source="bisect").points
    return spec, point
