"""What the fleet's failure automations tell (issue 35), judged in-process with the server's own trigger
matching and template rendering: a refusing host is one message a night per host and cause, and a
crashed shard's message names the crashed attempt's state and host even when its retry already has the
run on another host."""

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
    failure_notifications,
    refusal_notifications,
    refusal_resource,
)


def _event(name: str, resource: dict[str, str]) -> ReceivedEvent:
    return ReceivedEvent(occurred=datetime.now(UTC), event=name, resource=resource, id=uuid4())


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
