"""The automations `kernelsweep fleet up` installs on the server: the fleet's reflexes, which work with
nobody watching and without the fleet run (they live on the server, not in a flow).

- **Crash detection** (Prefect's recipe for zombie runs): a flow run whose host vanished (power
  loss, a terminated instance, an OOM kill of everything) sends no more heartbeats, and the
  open-source server does nothing about silence by itself; after `crash_after` seconds without one
  the run is marked Crashed.
- **Shard retries**: a shard flow run (a capture shard, or a compile farm's) that ends Crashed or
  Failed is scheduled again, bounded: the
  trigger matches only state changes whose run count (`prefect.run-count`, how many times the run
  started) is at most `retries`. The retry goes back to its family's pool, so any host of the family
  may take it, and it resumes from the shard's journal (kernelsweep.flows.fleet.shard). A bisect flow
  (kernelsweep.flows.bisect) whose host died is retried the same way: it resumes from its journal.
- **Notifications**: each `kernelsweep.regression` and `kernelsweep.report.summary` event the report
  emits, and each `kernelsweep.bisect.done` a bisect flow emits (kernelsweep.flows.bisect), is sent
  through a notification block the operator names (webhook, Slack, email: any Prefect notification
  block), its subject and body as their emitter wrote them.

- **Failures** reach the same block: a shard (capture or compile) or a fleet run that ends Crashed or
  Failed is told once, with its host and the state's message, and again for the same run only after
  `FAILURE_QUIET` (the trigger's window): a shard crashing on every retry of a night is one message.
  The state, its message and the host are the event's (the crashed attempt's), not the run's as it is
  when the message goes out: by then the retry may have the run, on another host.
- **Refusing hosts** too: a host that refuses a shard (one in the wrong pool, one without the run's
  pinned versions, a compile host on another SDK) emits `REFUSED_EVENT` as it refuses, and that is told
  once a night per host and cause, though a retry on another host completes the shard and the night
  looks green: a misplaced host would otherwise refuse every night unseen.
- **Retry storms**: `RETRY_STORM` shard retries within `FAILURE_QUIET`, whatever shards and hosts, are
  told once: each retry alone is a shard that another host rescued and the night may still complete,
  but hosts dying or refusing one after another is a fleet that needs someone before the next night.

Each is found again by its name, so installing one twice updates it.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState, SendNotification
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

from kernelsweep.names import slug
from kernelsweep.report.notify import BISECT_EVENT, REGRESSION_EVENT, RESOURCE_PREFIX, SUMMARY_EVENT

CRASH = "kernelsweep: crash flow runs whose host went silent"
RETRY = "kernelsweep: retry crashed or failed fleet shards"
NOTIFY = "kernelsweep: send regressions and nightly summaries"
FAILURES = "kernelsweep: tell of crashed or failed shards and fleet runs"
REFUSALS = "kernelsweep: tell of hosts that refuse shards"
STORMS = "kernelsweep: tell of shard retry storms"
RETRY_STORM = 5  # shard retries in FAILURE_QUIET that are one message: more than one host's bad night
RETRIED_EVENT = "prefect.flow-run.AwaitingRetry"  # the state the retry automation gives a shard
FAILURE_QUIET = timedelta(hours=12)  # one message per run (or refusing host and cause) and night
REFUSED_EVENT = "kernelsweep.host.refused"
CAUSE_LABEL = "kernelsweep.cause"  # wrong-pool, versions, compile-sdk
ENDED = ("Completed", "Failed", "Cancelled", "Crashed")
SHARD_FLOW = "sweep-shard"
FLEET_FLOW = "fleet"
SHARD_FLOWS = [SHARD_FLOW, "compile-shard"]  # a compile farm's shard is retried like a capture shard
BISECT_FLOW = "bisect"  # kernelsweep.flows.bisect's flow, started by a nightly step
RETRIED_FLOWS = [*SHARD_FLOWS, BISECT_FLOW]  # a bisect flow is retried too: each resumes from its journal


def install(client: SyncPrefectClient, automation: AutomationCore) -> None:
    """Create it, or update the one of its name; left alone when unchanged. An update gives the server's
    trigger a new id, which forgets what it was waiting for: a `fleet up` run again during a night would
    have dropped the silence clock of every running shard, and a host that died just before it would
    never have been marked Crashed."""
    existing = client.read_automations_by_name(automation.name)
    if not existing:
        client.create_automation(automation)
    elif existing[0].model_dump(include=set(AutomationCore.model_fields)) != automation.model_dump():
        client.update_automation(existing[0].id, automation)


def crash_detection(seconds: int) -> AutomationCore:
    """After a run starts or beats, expect a beat (or its end) within `seconds`."""
    return AutomationCore(
        name=CRASH,
        description="A flow run with no heartbeat for this long lost its host: mark it Crashed.",
        trigger=EventTrigger(
            match={"prefect.resource.id": "prefect.flow-run.*"},
            after={"prefect.flow-run.Running", "prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", *(f"prefect.flow-run.{state}" for state in ENDED)},
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=seconds),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                # Not forced: Prefect's rules keep a run that already ended as it ended. A heartbeat sent
                # as the run completes (the engine's heartbeat thread checks the state, then sends) opens
                # a silence clock no later beat closes; forced, it marked the completed run Crashed.
                force=False,
                message=f"no heartbeat for {seconds} s: the host running this flow run is gone",
            )
        ],
    )


def shard_retries(retries: int) -> AutomationCore:
    """A crashed or failed shard scheduled again, at most `retries` times (0: never)."""
    return AutomationCore(
        name=RETRY,
        description=f"Schedule a crashed or failed shard (or bisect) flow run again, at most {retries} times; any "
        "host of its family takes it and resumes from its journal.",
        enabled=retries > 0,
        trigger=EventTrigger(
            match={"prefect.resource.id": "prefect.flow-run.*", "prefect.run-count": run_counts(retries)},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": RETRIED_FLOWS},
            expect={"prefect.flow-run.Crashed", "prefect.flow-run.Failed"},
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.SCHEDULED,
                name=RETRIED_EVENT.rsplit(".", 1)[1],
                force=True,  # out of a final state, as `prefect flow-run retry` does
                message="retried by kernelsweep (shard retries): resumes where it stopped (its journal, or the "
                "NEFFs already in the store)",
            )
        ],
    )


def run_counts(retries: int) -> list[str]:
    """The run counts a failed shard may have and still be retried: 0 (it never started) to `retries`."""
    return [str(count) for count in range(retries + 1)]


def retries_installed(client: SyncPrefectClient) -> int:
    """How many times the server retries a shard: 0 when the automation is missing or turned off."""
    found = client.read_automations_by_name(RETRY)
    if not found or not found[0].enabled or not isinstance(found[0].trigger, EventTrigger):
        return 0
    counts = found[0].trigger.match.get("prefect.run-count") or []
    return max((int(c) for c in ([counts] if isinstance(counts, str) else counts)), default=0)


def notifications(block_document_id: UUID) -> AutomationCore:
    return AutomationCore(
        name=NOTIFY,
        description="Each regression the nightly report finds, its summary, and each bisect's culprit, through a "
        "notification block.",
        trigger=EventTrigger(
            match={"prefect.resource.id": f"{RESOURCE_PREFIX}*"},
            expect={REGRESSION_EVENT, SUMMARY_EVENT, BISECT_EVENT},
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[_send_as_written(block_document_id)],
    )


def _send_as_written(block_document_id: UUID) -> SendNotification:
    """Send the event through the block with the subject and body its emitter wrote in its payload."""
    return SendNotification(
        block_document_id=block_document_id, subject="{{ event.payload.subject }}", body="{{ event.payload.body }}"
    )


def failure_notifications(block_document_id: UUID) -> AutomationCore:
    return AutomationCore(
        name=FAILURES,
        description="A crashed or failed shard or fleet run, through the notification block (once a night per run).",
        trigger=EventTrigger(
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": [*SHARD_FLOWS, FLEET_FLOW]},
            expect={"prefect.flow-run.Crashed", "prefect.flow-run.Failed"},
            for_each={"prefect.resource.id"},
            posture=Posture.Reactive,
            threshold=1,
            within=FAILURE_QUIET,
        ),
        actions=[
            SendNotification(
                block_document_id=block_document_id,
                subject="kernelsweep {{ flow.name }} {{ flow_run.name }} "
                "{{ event.resource['prefect.state-name'] | lower }}",
                body="{{ flow_run.name }} ({{ flow_run.id }}) on host "
                "{{ flow_run.labels.get('kernelsweep.attempt.' ~ event.resource['prefect.run-count'], 'unknown') }}, "
                "attempt {{ event.resource['prefect.run-count'] }}: {{ event.resource['prefect.state-name'] }}: "
                "{{ event.resource.get('prefect.state-message') or '' }}",
            )
        ],
    )


def refusal_resource(host: str, cause: str) -> dict[str, str]:
    """The resource of a refusal's event: the host, and why (`CAUSE_LABEL`), the two its notice is once per."""
    return {"prefect.resource.id": f"kernelsweep.host.{slug(host)}", "prefect.resource.name": host, CAUSE_LABEL: cause}


def refusal_notifications(block_document_id: UUID) -> AutomationCore:
    return AutomationCore(
        name=REFUSALS,
        description="A host that refuses shards (wrong pool, other versions), through the notification block "
        "(once a night per host and cause).",
        trigger=EventTrigger(
            match={"prefect.resource.id": "kernelsweep.host.*"},
            expect={REFUSED_EVENT},
            for_each={"prefect.resource.id", CAUSE_LABEL},
            posture=Posture.Reactive,
            threshold=1,
            within=FAILURE_QUIET,
        ),
        actions=[_send_as_written(block_document_id)],
    )


def retry_storm_notifications(block_document_id: UUID) -> AutomationCore:
    return AutomationCore(
        name=STORMS,
        description=f"{RETRY_STORM} shard retries within {FAILURE_QUIET.total_seconds() / 3600:.0f} h, through the "
        "notification block (once per storm).",
        trigger=EventTrigger(
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": SHARD_FLOWS},
            expect={RETRIED_EVENT},
            posture=Posture.Reactive,
            threshold=RETRY_STORM,
            within=FAILURE_QUIET,
        ),
        actions=[
            SendNotification(
                block_document_id=block_document_id,
                subject=f"kernelsweep: a retry storm, {RETRY_STORM} shard retries within "
                f"{FAILURE_QUIET.total_seconds() / 3600:.0f} h",
                body=f"{RETRY_STORM} shards were retried after crashing or failing, the last "
                "{{ flow_run.name }} ({{ flow_run.id }}): hosts are dying or refusing one after another. "
                "`kernelsweep fleet status` shows the hosts gone; each fleet run's summary names every attempt.",
            )
        ],
    )
