"""What the fleet's failure automations tell (issue 35), judged in-process with the server's own trigger
matching and template rendering: a refusing host is one message a night per host and cause, and a
crashed shard's message names the crashed attempt's state and host even when its retry already has the
run on another host; and a storm of shard retries is one message, whichever shards and hosts."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from prefect.client.schemas.objects import FlowRun
from prefect.server.events.schemas.automations import EventTrigger
from prefect.server.events.schemas.events import ReceivedEvent
from prefect.server.utilities.user_templates import render_user_template_sync
from prefect.states import Running

from kernelsweep.fleet.hosts import attempt_label
from kernelsweep.flows.fleet.automations import (
    REFUSED_EVENT,
    RETRIED_EVENT,
    RETRY_STORM,
    failure_notifications,
    refusal_notifications,
    refusal_resource,
    retry_storm_notifications,
    shard_retries,
)


def _event(name: str, resource: dict[str, str], flow: str | None = None) -> ReceivedEvent:
    related = [{"prefect.resource.id": f"prefect.flow.{uuid4()}", "prefect.resource.role": "flow"}] if flow else []
    for r in related:
        r["prefect.resource.name"] = flow  # type: ignore[assignment]
    return ReceivedEvent(occurred=datetime.now(UTC), event=name, resource=resource, related=related, id=uuid4())


def test_shard_retries_anywhere_in_the_fleet_count_toward_one_storm_message():
    automation = retry_storm_notifications(uuid4())
    trigger = EventTrigger.model_validate(automation.trigger.model_dump())
    # the retry automation's state is the event the storm counts
    assert shard_retries(2).actions[0].name == RETRIED_EVENT.rsplit(".", 1)[1]  # type: ignore[union-attr]
    retries = [
        _event(RETRIED_EVENT, {"prefect.resource.id": f"prefect.flow-run.{uuid4()}"}, flow)
        for flow in ("sweep-shard", "sweep-shard", "compile-shard")
    ]
    assert all(trigger.covers(e) for e in retries)
    assert len({trigger.bucketing_key(e) for e in retries}) == 1  # one count for every shard and host
    assert trigger.threshold == RETRY_STORM > 1  # a single rescued shard is no storm
    fleet_retry = _event(RETRIED_EVENT, {"prefect.resource.id": f"prefect.flow-run.{uuid4()}"}, "fleet")
    crashed = _event("prefect.flow-run.Crashed", {"prefect.resource.id": f"prefect.flow-run.{uuid4()}"}, "sweep-shard")
    assert not trigger.covers(fleet_retry) and not trigger.covers(crashed)
    run = FlowRun(id=uuid4(), flow_id=uuid4(), name="sweep-night-shard-3-of-6", state=Running())
    body = render_user_template_sync(automation.actions[0].body, {"flow_run": run, "event": retries[-1]})  # type: ignore[union-attr]
    assert f"the last sweep-night-shard-3-of-6 ({run.id})" in body and "fleet status" in body


def test_a_refusal_is_told_once_per_host_and_cause_whatever_shard_it_refused():
    trigger = EventTrigger.model_validate(refusal_notifications(uuid4()).trigger.model_dump())
    stray = _event(REFUSED_EVENT, refusal_resource("trn1-x", "wrong-pool"))
    again = _event(REFUSED_EVENT, refusal_resource("trn1-x", "wrong-pool"))  # the next shard it takes
    pinned = _event(REFUSED_EVENT, refusal_resource("trn1-x", "versions"))
    other = _event(REFUSED_EVENT, refusal_resource("compile-2", "compile-sdk"))
    assert all(trigger.covers(e) for e in (stray, again, pinned, other))
    keys = {trigger.bucketing_key(e) for e in (stray, again, pinned, other)}
    assert len(keys) == 3  # one window (FAILURE_QUIET) per host and cause: the stray's second refusal shares one
    assert trigger.bucketing_key(stray) == trigger.bucketing_key(again)
    assert not trigger.covers(_event("kernelsweep.regression", {"prefect.resource.id": "kernelsweep.series.x"}))


def test_a_crash_is_told_with_the_crashed_attempts_state_and_host_not_the_retrys():
    action = failure_notifications(uuid4()).actions[0]
    # When the message goes out, the retry automation may already have the run Running on another host.
    run = FlowRun(
        id=uuid4(),
        flow_id=uuid4(),
        name="sweep-killed-shard-1-of-1",
        state=Running(),
        run_count=2,
        labels={
            "kernelsweep.host": "trn2-survivor",
            attempt_label(1): "trn2-doomed",
            attempt_label(2): "trn2-survivor",
        },
    )
    crashed = {
        "prefect.resource.id": f"prefect.flow-run.{run.id}",
        "prefect.run-count": "1",
        "prefect.state-name": "Crashed",
        "prefect.state-message": "no heartbeat for 60 s: the host running this flow run is gone",
    }
    context = {"flow": {"name": "sweep-shard"}, "flow_run": run, "event": _event("prefect.flow-run.Crashed", crashed)}
    subject = render_user_template_sync(action.subject, context)
    body = render_user_template_sync(action.body, context)
    assert subject == "kernelsweep sweep-shard sweep-killed-shard-1-of-1 crashed"
    assert body == (
        f"sweep-killed-shard-1-of-1 ({run.id}) on host trn2-doomed, attempt 1: Crashed: no heartbeat for 60 s: "
        "the host running this flow run is gone"
    )
