"""The fleet run's summary: one markdown artifact (`fleet-<sweep name>`), versioned run after run.

Per shard: its family, points, the rows read back from the dataset (ok, failed), its final state,
every host that started it (an earlier attempt with how it ended: crashed, refused) and a link to
its flow run; per family, the SDK each host reported and a flag
where the hosts of one family disagree (kernelsweep.fleet.hosts); what the run cost in
Neuron-host-hours and CPU-host-hours, per run and per 1,000 points, and at on-demand prices
(kernelsweep.fleet.cost). Object names are shown without their folder (the partition is in the
heading), so the table stays readable in the UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
from prefect.settings import PREFECT_UI_URL

from kernelsweep.fleet import HostReport, Shard, ShardData
from kernelsweep.fleet.cost import COMPILE, RunCost
from kernelsweep.flows.settings import prices_from_env
from kernelsweep.flows.ui import artifact_key
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.stores import S3Location
from kernelsweep.sweepspec import SweepSpec


@dataclass(frozen=True)
class Attempt:
    """One start of a shard: the host that took it, and how that attempt ended."""

    host: str
    ended: str  # "completed", "crashed: ...", "failed: ..." (a refusal names why), "running"

    def describe(self) -> str:
        return f"{self.host} ({self.ended})"


@dataclass(frozen=True)
class ShardOutcome:
    shard: Shard
    flow_run_id: str
    state: str  # COMPLETED, FAILED, CRASHED, CANCELLED
    message: str
    data: ShardData
    host: HostReport | None = None  # what the host of its last attempt reported
    attempts: tuple[Attempt, ...] = ()  # every host that started it, in order

    def retried(self) -> str | None:
        """The earlier attempts, as `trn2-a (crashed: ...)`; None when the first attempt was the last."""
        return ", ".join(a.describe() for a in self.attempts[:-1]) or None

    @property
    def completed(self) -> bool:
        return self.state == "COMPLETED"


def run_link(flow_run_id: str) -> str:
    base = PREFECT_UI_URL.value()
    return f"[{flow_run_id[:8]}]({base.rstrip('/')}/runs/flow-run/{flow_run_id})" if base else f"`{flow_run_id}`"


def fleet_cost(client: SyncPrefectClient, fleet_run_id: UUID) -> RunCost | None:
    """The hours a fleet run's shards held their hosts (capture shards by family, compile shards as the
    farm's) and the points its capture shards had; None for a run that started no shard (a sweep)."""
    children = FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[fleet_run_id]))
    seconds: dict[str, float] = {}
    points = 0
    for run in client.read_flow_runs(flow_run_filter=children):
        pool = COMPILE if COMPILE in run.tags else next((t for t in run.tags if t in PLATFORM_NAMES), None)
        if pool is None:
            continue
        seconds[pool] = seconds.get(pool, 0.0) + run.total_run_time.total_seconds()
        points += len(run.parameters.get("points") or []) if pool != COMPILE else 0
    return RunCost(seconds, points) if seconds else None


def publish(spec: SweepSpec, outcomes: list[ShardOutcome], flags: list[str], cost: RunCost | None = None) -> None:
    where = "s3://" if isinstance(spec.results_location, S3Location) else ""
    lines = [
        f"### fleet {spec.name}: {sum(o.completed for o in outcomes)} of {len(outcomes)} shards completed",
        "",
        *(f"**{flag}**" for flag in flags),
        f"Results: `{where}{spec.results_location}`",
        "",
        "| family | shard | points | ok | failed | state | host | flow run | objects |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        objects = "<br>".join(path.rsplit("/", 1)[-1] for path in o.data.objects) or "-"
        state = o.state.lower() + (f": {o.message}" if not o.completed and o.message else "")
        host = o.host.host if o.host else "-"
        if o.retried():
            host = f"{o.retried()}, then {host}"
        lines.append(
            f"| {o.shard.family} | {o.shard.index} | {len(o.shard.points)} | {o.data.ok} | {o.data.failed} "
            f"| {state.replace('|', '/')} | {host} | {run_link(o.flow_run_id)} | {objects} |"
        )
    lines += ["", "| host | family | compiler | runtime | nki | profiler |", "|---|---|---|---|---|---|"]
    hosts = {o.host.host: o.host for o in outcomes if o.host}
    for report in sorted(hosts.values(), key=lambda r: (r.family or "", r.host)):
        versions = " | ".join(report.versions.get(n) or "-" for n in ("compiler", "runtime", "nki", "profiler"))
        lines.append(f"| {report.host} | {report.family or 'any'} | {versions} |")
    if cost is not None:
        lines += ["", *cost.lines(prices_from_env())]
    create_markdown_artifact(
        key=artifact_key("fleet", spec.name), markdown="\n".join(lines), description=f"fleet run of sweep {spec.name}"
    )
