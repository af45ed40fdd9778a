"""The fleet's automations on a real Prefect server (the test harness): `fleet up` run again leaves an
unchanged automation as it is, so the server's trigger keeps what it was waiting for; the crash
automation's action crashes a running flow run and leaves one that ended as it ended."""

from __future__ import annotations

import pytest
from prefect import flow, get_client
from prefect.client.schemas.objects import State, StateType

from kernelsweep.flows.fleet.automations import CRASH, crash_detection, install

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _trigger_id() -> str:
    """The server's id of the crash automation's trigger: the key of its pending silence clocks."""
    with get_client(sync_client=True) as client:
        [automation] = client.read_automations_by_name(CRASH)
        answer = client.request("GET", f"/automations/{automation.id}")
        return answer.json()["trigger"]["id"]


def test_installing_an_unchanged_automation_keeps_its_trigger_and_a_changed_one_is_updated():
    with get_client(sync_client=True) as client:
        install(client, crash_detection(60))
        first = _trigger_id()
        install(client, crash_detection(60))  # `fleet up` again, the same settings
        assert _trigger_id() == first
        install(client, crash_detection(90))  # `fleet up --crash-after 90`
        assert _trigger_id() != first
        [updated] = client.read_automations_by_name(CRASH)
        assert updated.trigger.within.total_seconds() == 90


@flow
def _silent() -> None:
    """A flow for runs made through the API only."""


def test_the_crash_action_crashes_a_running_run_and_leaves_a_completed_one_completed():
    """A heartbeat sent as a run completes opens a silence clock that no later beat closes: its action
    must not turn the completed run into a crashed one (tests/test_fleet.py waits for the running case
    on a fleet)."""
    [action] = crash_detection(60).actions
    with get_client(sync_client=True) as client:
        ended = {}
        for last in (StateType.RUNNING, StateType.COMPLETED):
            run = client.create_flow_run(_silent, state=State(type=StateType.PENDING))
            client.set_flow_run_state(run.id, State(type=StateType.RUNNING))
            if last is StateType.COMPLETED:
                client.set_flow_run_state(run.id, State(type=StateType.COMPLETED))
            client.set_flow_run_state(run.id, State(type=action.state, message=action.message), force=action.force)
            ended[last] = client.read_flow_run(run.id).state.type
    assert ended == {StateType.RUNNING: StateType.CRASHED, StateType.COMPLETED: StateType.COMPLETED}
