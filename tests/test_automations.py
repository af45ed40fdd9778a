"""The fleet's automations on a real Prefect server (the test harness): `fleet up` run again leaves an
unchanged automation as it is, so the server's trigger keeps what it was waiting for."""

from __future__ import annotations

import pytest
from prefect import get_client

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
