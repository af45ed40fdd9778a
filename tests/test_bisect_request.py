"""A nightly step becomes a bisection with no server (issue 37): the report's step event and the request
it carries, the builds a request bisects, the automation that turns the event into a run of the
family's bisect deployment (judged with the server's own trigger matching and parameter rendering),
and a bisection's rows kept out of the report's series."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from uuid import uuid4

import numpy as np
import pytest
from prefect.server.events.schemas.automations import EventTrigger
from prefect.server.events.schemas.events import ReceivedEvent
from prefect.utilities.schema_tools.hydration import HydrationContext, hydrate
from report_rows import nights, report_of

from kernelsweep.bisect.request import FAMILY_LABEL, STEP_EVENT, StepRequest
from kernelsweep.errors import UsageError
from kernelsweep.flows.fleet.automations import notifications, shard_retries
from kernelsweep.flows.fleet.bisect_trigger import bisect_on_step
from kernelsweep.report.notify import BISECT_EVENT, REGRESSION_EVENT, SUMMARY_EVENT, notices
from kernelsweep.sim import SIM_VERSION_SUFFIX


def _stepped(simulated: bool = True):
    """16 nights of two shapes; from night 10 on, a new compiler and n=2 1.3x slower."""
    rows = nights(np.random.default_rng(0), ["n=1", "n=2"], 16, step={"n=2": 1.3}, step_night=10)
    suffix = SIM_VERSION_SUFFIX if simulated else ""
    return [replace(r, compiler_version=f"{r.compiler_version}.0{suffix}") for r in rows]


def _received(name: str, resource: dict[str, str], payload: dict) -> ReceivedEvent:
    return ReceivedEvent(occurred=datetime.now(UTC), event=name, resource=resource, payload=payload, id=uuid4())


def test_a_step_whose_compiler_changed_asks_for_a_bisection_of_its_point_with_its_evidence():
    report = report_of(_stepped())
    found = notices(report, "https://reports.example/r/index.html")
    [regression] = [n for n in found if n.event == REGRESSION_EVENT]
    [asked] = [n for n in found if n.event == STEP_EVENT]
    assert asked.resource[FAMILY_LABEL] == "trn2" and asked.resource["prefect.resource.id"].startswith("kernelsweep.")
    request = StepRequest.from_json(asked.payload["request"])
    assert (request.kernel, request.shape, request.platform) == ("vector_add", "n=2", "trn2")
    assert (request.good_build, request.bad_build) == ("2.21.0", "2.22.0")  # the versions a build axis installs
    assert request.results == "s3://bucket/results" and request.night == regression.payload["night"]
    assert request.change_percent == regression.payload["change_percent"] > 20  # the step's own evidence
    evidence = request.evidence()
    assert f"{request.change_percent:+}%" in evidence and f"{request.ci_low_percent:+}%" in evidence
    assert "compiler 2.21.0 -> 2.22.0" in evidence


def test_steps_beyond_the_nights_cap_are_not_bisected_and_the_summary_says_so_by_name():
    shapes = ["n=1", "n=2", "n=3"]
    rows = nights(np.random.default_rng(0), shapes, 16, step=dict.fromkeys(shapes, 1.3), step_night=10)
    report = report_of([replace(r, compiler_version=f"{r.compiler_version}.0{SIM_VERSION_SUFFIX}") for r in rows])
    for cap in (2, 0):
        found = notices(report, "link", bisects=cap)
        asked = [n.resource["prefect.resource.name"] for n in found if n.event == STEP_EVENT]
        [summary] = [n for n in found if n.event == SUMMARY_EVENT]
        every = [f"vector_add {r['shape']} {r['dtype']} trn2" for r in report.regression_rows(report.open_regressions)]
        assert len(every) == 3 and asked == every[:cap] and summary.payload["not_bisected"] == every[cap:]
        assert f"Not bisected: cap reached ({cap} a night): {'; '.join(every[cap:])}." in summary.payload["body"]
    told = [n for n in notices(report, "link", bisects=3) if n.event == SUMMARY_EVENT]
    assert "Not bisected" not in told[0].payload["body"] and told[0].payload["not_bisected"] == []


def test_a_step_over_the_cap_gets_its_turn_on_a_later_night_however_many_newer_steps_keep_coming(tmp_path):
    from kernelsweep.bisect.store import BisectJournal, finished_steps

    # three kernels' steps, found on nights 8, 10 and 12 (each newer than the one before); one bisection a night
    rows = [
        r
        for kernel, night in (("older", 8), ("newer", 10), ("newest", 12))
        for r in nights(np.random.default_rng(night), ["n=1"], 16, step={"n=1": 1.3}, step_night=night, kernel=kernel)
    ]
    report = report_of([replace(r, compiler_version=f"{r.compiler_version}.0{SIM_VERSION_SUFFIX}") for r in rows])
    results = str(tmp_path / "results")
    turns = []
    for _ in range(3):  # each night the step asked for is bisected to an outcome, as its flow does
        found = notices(report, "link", bisects=1, bisected=finished_steps(results))
        [asked] = [StepRequest.from_json(n.payload["request"]) for n in found if n.event == STEP_EVENT]
        [summary] = [n for n in found if n.event == SUMMARY_EVENT]
        turns.append((asked.kernel, len(summary.payload["not_bisected"])))
        journal = BisectJournal(results, {"point": asked.kernel})
        journal.asked_for(asked.key)
        journal.finish({"status": "found"})
    assert turns == [("older", 2), ("newer", 1), ("newest", 0)]  # oldest first; a bisected step is not asked again
    assert not [
        n for n in notices(report, "link", bisects=1, bisected=finished_steps(results)) if n.event == STEP_EVENT
    ]
    BisectJournal(results, {"point": "unfinished"}).asked_for("a step whose bisection crashed")
    (tmp_path / "results" / "_bisect" / "broken.json").write_text("{")
    assert len(finished_steps(results)) == 3  # one with no outcome yet is asked for again (it resumes)


def test_no_bisection_is_asked_for_builds_it_cannot_install_or_steps_with_no_compiler_change():
    real_sdk = notices(report_of(_stepped(simulated=False)), "link")
    assert not [n for n in real_sdk if n.event == STEP_EVENT]  # real SDK environments are not wired yet
    same_compiler = [replace(r, compiler_version=f"2.21.0{SIM_VERSION_SUFFIX}") for r in _stepped()]
    found = notices(report_of(same_compiler), "link")
    assert [n.event for n in found].count(REGRESSION_EVENT) == 1 and not [n for n in found if n.event == STEP_EVENT]


def test_the_builds_bisected_are_the_release_orders_between_the_ends_or_the_ends_alone():
    request = StepRequest.from_json(
        StepRequest("k", "n=2", "float32", "trn2", "2026-03-11", "r", "2.21.0", "2.24.0", 1, 2, 100, 90, 110, "7 v 2")
        .as_json()
    )  # fmt: skip
    order = ["2.20.0", "2.21.0", "2.22.0", "2.23.0", "2.24.0", "2.25.0"]
    assert request.builds(order) == ["2.21.0", "2.22.0", "2.23.0", "2.24.0"]
    assert request.builds([]) == ["2.21.0", "2.24.0"]
    assert request.builds(["2.24.0", "2.21.0"]) == ["2.21.0", "2.24.0"]  # a list in the wrong order is not used
    with pytest.raises(UsageError, match="lacks good_build, bad_build"):
        StepRequest.from_json({k: v for k, v in request.as_json().items() if not k.endswith("_build")})


def test_the_step_event_runs_its_familys_bisect_deployment_with_the_request_and_the_culprit_is_told():
    deployment = uuid4()
    automation = bisect_on_step("trn2", deployment)
    trigger = EventTrigger.model_validate(automation.trigger.model_dump())
    [asked] = [n for n in notices(report_of(_stepped()), "link") if n.event == STEP_EVENT]
    event = _received(asked.event, asked.resource, asked.payload)
    assert trigger.covers(event)
    elsewhere = _received(asked.event, asked.resource | {FAMILY_LABEL: "trn1"}, asked.payload)
    assert not trigger.covers(elsewhere)  # a trn1 step is for trn1's hosts
    [action] = automation.actions
    assert action.deployment_id == deployment  # type: ignore[union-attr]
    # the parameters as the server renders them: the request whole, as a mapping, not its text
    from prefect.server.events.actions import RunDeployment

    template = dict(action.parameters)  # type: ignore[union-attr]
    RunDeployment._upgrade_v1_templates(template)
    rendered = hydrate(template, HydrationContext(render_jinja=True, jinja_context={"event": event}))
    assert rendered == {"request": asked.payload["request"]}
    # the bisect's own event goes through the notification block like a regression's
    told = EventTrigger.model_validate(notifications(uuid4()).trigger.model_dump())
    assert told.covers(_received(BISECT_EVENT, {"prefect.resource.id": "kernelsweep.bisect.abc"}, {}))
    assert not told.covers(event)  # the request itself is no message


def test_a_crashed_bisect_flow_is_retried_by_the_shard_retry_automation_within_its_retries():
    trigger = EventTrigger.model_validate(shard_retries(2).trigger.model_dump())

    def crashed(flow: str, run_count: int) -> ReceivedEvent:
        run = {"prefect.resource.id": f"prefect.flow-run.{uuid4()}", "prefect.run-count": str(run_count)}
        flow_resource = {"prefect.resource.id": f"prefect.flow.{uuid4()}", "prefect.resource.role": "flow",
                         "prefect.resource.name": flow}  # fmt: skip
        return ReceivedEvent(occurred=datetime.now(UTC), event="prefect.flow-run.Crashed", resource=run,
                             related=[flow_resource], id=uuid4())  # fmt: skip

    assert trigger.covers(crashed("bisect", 1)) and trigger.covers(crashed("sweep-shard", 1))
    assert not trigger.covers(crashed("bisect", 3))  # its retries spent
    assert not trigger.covers(crashed("report", 1))  # only flows that resume from a journal
