"""The `bisect` flow: a nightly step's culprit build, looked for on a host of the point's family.

The fleet's automation (kernelsweep.flows.fleet.bisect_trigger) starts it from the report's step event
(kernelsweep.bisect.request) on the family's `bisect/<family>` deployment, with the event's request;
the deployment's `spec` (the nightly spec) gives the artifact store. It runs what `kernelsweep bisect
--builds` runs (kernelsweep.bisect.run), the builds from the operator's release-ordered list
(`kernelsweep_sdk_builds`, a Prefect variable) between the step's two compiler versions, and its
budget is `max_runs` runs a position. Each build's NEFF is compiled on the compile farm while it is up,
before that build's first run: a one-point `compile-shard` run carrying the build (its tools' variables,
kernelsweep.bisect.axis.Axis.build_env), so the run measured here finds the NEFF in the store; with the farm
down, or its run not completed within `execution.worker_wait_seconds` of the nightly spec, this host
compiles it, as a fleet search does (kernelsweep.flows.fleet.farm.farm_or_here).

Its result is a markdown artifact (`bisect-<series>`, one history per point) and an event
(`BISECT_EVENT`) with a finished subject and body, which the notification automation `fleet up
--notify` installs sends: the culprit and its evidence (the change it made, each side against the
ends) beside the nightly step's own. A run retried after its host died resumes from the bisect's
journal, measuring only the runs it lacks; a request already bisected (every report repeats an open
step's event) replays its journal, measures nothing and tells nobody again.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.events import emit_event
from prefect.variables import Variable

from kernelsweep.bisect import Question, bisect, builds_axis, lines
from kernelsweep.bisect.axis import COMPILER_VERSION_ENV
from kernelsweep.bisect.request import BUILDS_VARIABLE, StepRequest
from kernelsweep.bisect.search import MAX_RUNS, Outcome
from kernelsweep.bisect.store import BisectJournal
from kernelsweep.fleet import Shard
from kernelsweep.flows.cli.bench import shape_grid
from kernelsweep.flows.fleet.farm import farm_or_here
from kernelsweep.flows.settings import locations_from_env
from kernelsweep.names import slug
from kernelsweep.report import Rule
from kernelsweep.report.notify import BISECT_EVENT, RESOURCE_PREFIX
from kernelsweep.sweepspec import Point, SweepSpec

REPEATS = 3  # profiled captures a run, as `kernelsweep bisect` takes by default


@flow(name="bisect", flow_run_name="bisect-{request[kernel]}-{request[platform]}")
def bisect_step(
    request: dict[str, Any], spec: SweepSpec, max_runs: int = MAX_RUNS, repeats: int = REPEATS, rounds: int = 0
) -> str:
    """Find the SDK build that made a nightly step's point slower.

    Args:
        request: The step, as the report's `kernelsweep.step.found` event carries it.
        spec: The nightly spec: its artifact store holds the bisection's NEFFs; its
            `execution.worker_wait_seconds` bounds the wait for a compile worker.
        max_runs: Budget: runs of one position before it counts as undecided.
        repeats: Profiled captures per run.
        rounds: Decide the ends and each midpoint on up to this many rounds captured in turn on one core
            (at least 3), instead of on runs (0).

    Returns:
        The outcome in one line.
    """
    step = StepRequest.from_json(request)
    axis = builds_axis(step.builds(_release_order()), None, None)
    point = {"kernel": step.kernel, "grid": shape_grid(step.shape), "dtypes": [step.dtype]}
    data = {
        "name": "bisect",
        "platforms": [step.platform],
        "kernels": [point],
        "capture": {"repeats": repeats},
        "toolchain": "sim",  # the only SDK builds a bisection installs yet (kernelsweep.bisect.request)
        "artifacts": spec.artifacts,
        "results": step.results,
        "execution": {"worker_wait_seconds": spec.execution.worker_wait_seconds},
    }
    question = Question(data, axis, Rule(), max_runs, rounds=rounds)
    asked = BisectJournal(step.results, question.as_json())
    told_before = "outcome" in asked.doc
    asked.asked_for(step.key)  # once it has an outcome, the nightly report asks for this step no more
    outcome, journal, measured = bisect(question, locations_from_env(), compile_first=_on_the_farm)
    shown = lines(outcome, axis)
    total = len(journal.doc["runs"])
    said = f"bisect {journal.id} over {len(axis.labels)} builds: {total} runs ({total - measured} from its journal)"
    log = get_run_logger()
    for line in (said, *shown):
        log.info(line)
    subject = _subject(step, outcome, axis.labels)
    evidence = [step.evidence(), said, *shown, f"journal {journal.uri}; rows: sweep bisect-{journal.id}"]
    create_markdown_artifact(
        key=f"bisect-{slug(step.series)}"[:100],
        markdown="\n".join([f"**{subject}**", "", *(f"* {line}" for line in evidence)]),
        description=f"bisect of {step.series}",
    )
    if not told_before:
        culprit = axis.labels[outcome.bad] if outcome.status == "found" else None
        emit_event(
            event=BISECT_EVENT,
            resource={
                "prefect.resource.id": f"{RESOURCE_PREFIX}bisect.{journal.id}",
                "prefect.resource.name": step.series,
            },
            payload={
                "subject": subject,
                "body": "; ".join(evidence[:-1]),
                "status": outcome.status,
                "culprit": culprit,
            },
        )
    return subject


def _on_the_farm(spec: SweepSpec, point: Point, build: dict[str, str]) -> None:
    """A build's NEFF compiled on the farm, as that build, before its first run here (else here)."""
    what = f"build {build[COMPILER_VERSION_ENV]}'s NEFF"
    farm_or_here(spec, Shard(0, point.platform, [point]), what, None, None, build, kind="bisect")


def _release_order() -> list[str]:
    """The operator's SDK builds in release order; none (the ends alone) when unset or not a list."""
    value = Variable.get(BUILDS_VARIABLE, default=None)
    if value is not None and not isinstance(value, list):
        get_run_logger().warning("variable %s is not a JSON list of builds; bisecting the ends alone", BUILDS_VARIABLE)
    return [str(build) for build in value] if isinstance(value, list) else []


def _subject(step: StepRequest, outcome: Outcome, builds: tuple[str, ...]) -> str:
    if outcome.status == "found":
        return f"kernelsweep bisect: {step.series}: build {builds[outcome.bad]} made it slower"
    return f"kernelsweep bisect: {step.series}: no culprit ({outcome.status})"
