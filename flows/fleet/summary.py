"""The fleet run's summary: one markdown artifact (`fleet-<sweep name>`), versioned run after run.

Per shard: its family, points, the rows read back from the dataset (ok, failed), its final state,
every host that started it and a link to its flow run; below the table, every attempt that did not
complete, of a capture shard or of its compile shard on the farm, with its host and why (crashed,
refused: a host in the wrong pool, a compile host on another SDK), so a host a retry rescued stays
named; per family, the SDK each host reported and a flag where the hosts of one family disagree
(kernelsweep.fleet.hosts); what the run cost in Neuron-host-hours (measuring and dead) and
CPU-host-hours, per run and per 1,000 points, and at on-demand prices (kernelsweep.fleet.cost).

The UI never wraps a table cell (it scrolls a wide table sideways, its right part out of sight), so
the tables keep to few columns of short cells, a shard's hosts one a line; messages, object names and
versions, which are long, are lists, which wrap (object names without their folder: the partition is
in the heading).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from uuid import UUID

from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
from prefect.client.schemas.objects import FlowRun, State, StateType
from prefect.settings import PREFECT_UI_URL

from kernelsweep.fleet import HostReport, Shard, ShardData
from kernelsweep.fleet.cost import COMPILE, RunCost
from kernelsweep.fleet.hosts import VERSION_NAMES
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

    @property
    def how(self) -> str:
        """How it ended in one word (crashed, failed, ...), for a table cell; the message is in the list."""
        return self.ended.split(":", 1)[0]


@dataclass(frozen=True)
class ShardOutcome:
    shard: Shard
    flow_run_id: str
    state: str  # COMPLETED, FAILED, CRASHED, CANCELLED
    message: str
    data: ShardData
    host: HostReport | None = None  # what the host of its last attempt reported
    attempts: tuple[Attempt, ...] = ()  # every host that started it, in order
    compile_attempts: tuple[Attempt, ...] = ()  # every compile host that started its compile shard

    def retried(self) -> str | None:
        """The earlier attempts, as `trn2-a (crashed: ...)`; None when the first attempt was the last."""
        return ", ".join(a.describe() for a in self.attempts[:-1]) or None

    def unfinished(self, *, capture: bool = True) -> list[str]:
        """Each attempt, of the capture shard (unless `capture` is False) or of its compile shard, that
        ended other than completed (or is still running)."""
        where = f"shard {self.shard.index} ({self.shard.family})"
        kinds = [("", self.attempts)] if capture else []
        return [
            f"{where}{kind}: {a.describe()}"
            for kind, attempts in [*kinds, (", compile", self.compile_attempts)]
            for a in attempts
            if a.how not in ("completed", "running")
        ]

    @property
    def completed(self) -> bool:
        return self.state == "COMPLETED"


def run_link(flow_run_id: str) -> str:
    base = PREFECT_UI_URL.value()
    return f"[{flow_run_id[:8]}]({base.rstrip('/')}/runs/flow-run/{flow_run_id})" if base else f"`{flow_run_id}`"


def shard_runs(client: SyncPrefectClient, fleet_run_id: UUID) -> list[tuple[FlowRun, list[State]]]:
    """A fleet run's shard flow runs (capture and compile), each with its state history."""
    children = FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[fleet_run_id]))
    return [(run, client.read_flow_run_states(run.id)) for run in client.read_flow_runs(flow_run_filter=children)]


def fleet_cost(client: SyncPrefectClient, fleet_run_id: UUID) -> RunCost | None:
    return run_cost(client, shard_runs(client, fleet_run_id))


def run_cost(client: SyncPrefectClient, shards: list[tuple[FlowRun, list[State]]]) -> RunCost | None:
    """What the fleet run's `shards` cost, with the compile runs of its search shards' batches (children
    of their search shard, not of the fleet run: kernelsweep.flows.fleet.farm.compile_batch) as the farm's hours."""
    searching = [run.id for run, _ in shards if "search" in run.tags and COMPILE not in run.tags]
    below = FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=searching))
    batches = [run for run in client.read_flow_runs(flow_run_filter=below) if COMPILE in run.tags] if searching else []
    return cost_of([*shards, *((run, client.read_flow_run_states(run.id)) for run in batches)])


def cost_of(runs: Iterable[tuple[FlowRun, list[State]]]) -> RunCost | None:
    """The hours a fleet run's shards held their hosts (capture shards by family, compile shards as the
    farm's), the part of them crashed attempts held, and the points its capture shards had; None for a
    run that started no shard (a sweep)."""
    seconds: dict[str, float] = {}
    dead: dict[str, float] = {}
    points = 0
    for run, states in runs:
        pool = COMPILE if COMPILE in run.tags else next((t for t in run.tags if t in PLATFORM_NAMES), None)
        if pool is None:
            continue
        measuring, lost = held_seconds(states)
        seconds[pool] = seconds.get(pool, 0.0) + measuring + lost
        dead[pool] = dead.get(pool, 0.0) + lost
        points += len(run.parameters.get("points") or []) if pool != COMPILE else 0
    return RunCost(seconds, points, dead) if seconds else None


def held_seconds(states: Iterable[State]) -> tuple[float, float]:
    """(live, dead) seconds of a flow run's attempts, each from its Running to the state after it: an
    attempt that ended Crashed is dead time from its start to when it was declared crashed; one still
    running is not counted yet."""
    live = dead = 0.0
    ordered = sorted(states, key=lambda s: s.timestamp)
    for state, after in pairwise(ordered):
        if state.type == StateType.RUNNING:
            span = (after.timestamp - state.timestamp).total_seconds()
            if after.type == StateType.CRASHED:
                dead += span
            else:
                live += span
    return live, dead


def publish(spec: SweepSpec, outcomes: list[ShardOutcome], flags: list[str], cost: RunCost | None = None) -> None:
    create_markdown_artifact(
        key=artifact_key("fleet", spec.name),
        markdown=summary_markdown(spec, outcomes, flags, cost),
        description=f"fleet run of sweep {spec.name}",
    )


def summary_markdown(
    spec: SweepSpec, outcomes: list[ShardOutcome], flags: list[str], cost: RunCost | None = None
) -> str:
    where = "s3://" if isinstance(spec.results_location, S3Location) else ""
    lines = [
        f"### fleet {spec.name}: {sum(o.completed for o in outcomes)} of {len(outcomes)} shards completed",
        "",
        *(f"**{flag}**" for flag in flags),
        f"Results: `{where}{spec.results_location}`",
        "",
        "| family | shard | points | ok | failed | state | hosts | flow run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        tried = "<br>".join(a.host if a.how == "completed" else f"{a.host} ({a.how})" for a in o.attempts)
        lines.append(
            f"| {o.shard.family} | {o.shard.index} | {len(o.shard.points)} | {o.data.ok} | {o.data.failed} "
            f"| {o.state.lower()} | {tried or (o.host.host if o.host else '-')} | {run_link(o.flow_run_id)} |"
        )
    unfinished = [line for o in outcomes for line in o.unfinished()]
    if unfinished:
        lines += ["", "Attempts that did not complete (the shard went to another host, or failed):"]
        lines += [f"- {_one_line(line)}" for line in unfinished]
    failed = [f"- shard {o.shard.index} ({o.shard.family}) {o.state.lower()}: {_one_line(o.message)}"
              for o in outcomes if not o.completed and o.message]  # fmt: skip
    lines += ["", "Shards that did not complete:", *failed] if failed else []
    lines += ["", "Objects written (in the results location above):"]
    lines += [f"- shard {o.shard.index}: " + (", ".join(f"`{path.rsplit('/', 1)[-1]}`" for path in o.data.objects)
              or "none") for o in outcomes]  # fmt: skip
    lines += ["", "SDK per host:"]
    hosts = {o.host.host: o.host for o in outcomes if o.host}
    for report in sorted(hosts.values(), key=lambda r: (r.family or "", r.host)):
        versions = ", ".join(f"{n} {report.versions.get(n) or '-'}" for n in VERSION_NAMES)
        lines.append(f"- {report.host} ({report.family or 'any'}): {versions}")
    if cost is not None:
        lines += ["", *cost.lines(prices_from_env())]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """A message on one markdown line: a line break in it would end the list item."""
    return " ".join(text.split())
