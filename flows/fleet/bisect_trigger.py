"""The automation that starts a bisect flow when the nightly report finds a step (issue 37).

The report emits `kernelsweep.step.found` for each open regression a bisection can act on
(kernelsweep.bisect.request), its resource labelled with the point's family. One automation per family
with a `bisect/<family>` deployment runs that deployment, on the family's pool, with the event's
request as its parameter: the step is chased on the kind of host that measured it, with nobody
starting anything. `kernelsweep fleet up` installs them after deploying (a deployment's id exists only
then); installing again updates each by its name.

A step already being bisected is not asked for again: the report looks up the bisect flow runs not
final yet (scheduled, retrying, running, paused) and reads the step each one answers from the request
it was started with (`steps_being_bisected`). The server is what knows, so a report that crashed and
ran again, or two reports of one night, see the same runs; a bisection whose retries are spent is
final (Crashed or Failed) and its step is asked for again, to resume from its journal.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import (
    FlowFilter,
    FlowFilterName,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.events.actions import RunDeployment
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

from kernelsweep.bisect.request import FAMILY_LABEL, STEP_EVENT, StepRequest
from kernelsweep.errors import UsageError
from kernelsweep.flows.fleet.automations import BISECT_FLOW, install
from kernelsweep.report.notify import RESOURCE_PREFIX


def bisect_on_step(family: str, deployment_id: UUID) -> AutomationCore:
    """Each step event of `family`'s points runs the family's bisect deployment with its request."""
    return AutomationCore(
        name=f"kernelsweep: bisect a {family} step to its culprit build",
        description=f"A nightly step of a {family} point whose compiler changed: bisect/{family} looks for the "
        "build that did it.",
        trigger=EventTrigger(
            match={"prefect.resource.id": f"{RESOURCE_PREFIX}step.*", FAMILY_LABEL: family},
            expect={STEP_EVENT},
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[
            RunDeployment(
                source="selected", deployment_id=deployment_id, parameters={"request": "{{ event.payload.request }}"}
            )
        ],
    )


def install_bisect_triggers(client: SyncPrefectClient, deployments: dict[str, UUID]) -> list[str]:
    """One automation per family with a `bisect/<family>` deployment (`deployments`: `flow/name` -> id)."""
    made = []
    for name, deployment_id in sorted(deployments.items()):
        flow_name, _, family = name.partition("/")
        if flow_name == BISECT_FLOW:
            install(client, bisect_on_step(family, deployment_id))
            made.append(family)
    return made


_UNDER_WAY = [StateType.SCHEDULED, StateType.PENDING, StateType.RUNNING, StateType.PAUSED, StateType.CANCELLING]
_PAGE = 200  # flow runs read a request


def steps_being_bisected(client: SyncPrefectClient) -> set[str]:
    """The steps (a StepRequest's `key`) whose bisect flow run is not final: scheduled (a retry
    included), running or paused. A run whose request does not read as one answers no step."""
    under_way = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=_UNDER_WAY)))
    bisects = FlowFilter(name=FlowFilterName(any_=[BISECT_FLOW]))
    steps: set[str] = set()
    offset = 0
    while page := client.read_flow_runs(
        flow_filter=bisects, flow_run_filter=under_way, limit=_PAGE, offset=offset
    ):  # fmt: skip
        for run in page:
            request = run.parameters.get("request")
            try:
                steps.update([StepRequest.from_json(request).key] if isinstance(request, dict) else [])
            except UsageError:
                continue
        offset += len(page)
    return steps
