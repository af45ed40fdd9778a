"""A step whose bisect flow is still under way is not asked for again (issue 37): the report reads the
bisect flow runs that are not final from the server (a Prefect test server here), skips their steps
and says so in the night's summary; a step whose bisection crashed with its retries spent is asked for
again, to resume from its journal."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from prefect.client.orchestration import get_client
from prefect.states import AwaitingRetry, Crashed, Running, Scheduled
from report_rows import nights, report_of

from kernelsweep.bisect.request import STEP_EVENT, StepRequest
from kernelsweep.flows.bisect import bisect_step
from kernelsweep.flows.fleet.bisect_trigger import steps_being_bisected
from kernelsweep.report.notify import SUMMARY_EVENT, notices
from kernelsweep.sim import SIM_VERSION_SUFFIX

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_a_step_with_a_bisect_flow_under_way_is_named_not_asked_and_a_spent_one_is_asked_again():
    shapes = ["n=11", "n=12", "n=13", "n=14"]  # shapes no other test's bisect flow runs answer
    rows = nights(np.random.default_rng(3), shapes, 16, step=dict.fromkeys(shapes, 1.3), step_night=10)
    report = report_of([replace(r, compiler_version=f"{r.compiler_version}.0{SIM_VERSION_SUFFIX}") for r in rows])
    requests = {
        StepRequest.from_json(n.payload["request"]).shape: n.payload["request"]
        for n in notices(report, "link", bisects=len(shapes))
        if n.event == STEP_EVENT
    }
    assert sorted(requests) == shapes
    with get_client(sync_client=True) as client:

        def started(shape: str, *states) -> None:  # a run the automation made, through these states
            run = client.create_flow_run(bisect_step, parameters={"request": requests[shape]}, state=Scheduled())
            for state in states:
                client.set_flow_run_state(run.id, state, force=True)

        started("n=11")  # scheduled, no host has taken it yet
        started("n=12", Running(), Crashed(), AwaitingRetry())  # its host died; the retry automation rescheduled it
        started("n=13", Running(), Crashed())  # crashed with its retries spent: final
        client.create_flow_run(bisect_step, parameters={"request": {"kernel": "k"}}, state=Running())  # no step
        under_way = steps_being_bisected(client)
    series = {shape: f"vector_add {shape} float32 trn2" for shape in shapes}
    keys = {shape: StepRequest.from_json(request).key for shape, request in requests.items()}
    assert {keys["n=11"], keys["n=12"]} <= under_way and not {keys["n=13"], keys["n=14"]} & under_way

    found = notices(report, "link", bisects=len(shapes), being_bisected=under_way)
    asked = [n.resource["prefect.resource.name"] for n in found if n.event == STEP_EVENT]
    [summary] = [n for n in found if n.event == SUMMARY_EVENT]
    assert sorted(asked) == [series["n=13"], series["n=14"]]  # the spent one is asked again, to resume
    assert sorted(summary.payload["being_bisected"]) == [series["n=11"], series["n=12"]]
    assert f"Being bisected: {'; '.join(summary.payload['being_bisected'])}." in summary.payload["body"]
    assert summary.payload["not_bisected"] == []  # under way is not over the cap: it takes no turn of it
    capped = notices(report, "link", bisects=1, being_bisected=under_way)
    [asked_one] = [n.resource["prefect.resource.name"] for n in capped if n.event == STEP_EVENT]
    [summary] = [n for n in capped if n.event == SUMMARY_EVENT]
    assert sorted([asked_one, *summary.payload["not_bisected"]]) == [series["n=13"], series["n=14"]]
