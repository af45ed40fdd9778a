"""The fleet run's wait for its shards: until every one is final, and no retry is still coming for it.

A shard is final when it completed or was cancelled, or when it crashed or failed with no retry left:
the server's retry automation (kernelsweep.flows.fleet.automations) schedules a shard again while its run
count is within the retries installed, so a crashed shard with a retry due is waited for (it
resumes on another host) rather than reported. Should the automation not act (turned off in the
UI between the read and the crash), the wait gives up on it after RETRY_GRACE_SECONDS.

A family whose pool has had no worker online for `execution.worker_wait_seconds` gets its
unstarted shards cancelled with a message saying so, rather than a fleet run that never ends.
"""

from __future__ import annotations

import time
from uuid import UUID

from prefect import get_run_logger
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, WorkerFilter, WorkerFilterStatus
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.states import Cancelled

from kernelsweep.fleet import Shard
from kernelsweep.sweepspec import SweepSpec

POLL_SECONDS = 2.0
RETRY_GRACE_SECONDS = 120.0  # a crashed shard's retry is due within seconds; past this it is not coming
_UNSTARTED = {StateType.SCHEDULED, StateType.PENDING}
_RETRIED = {StateType.CRASHED, StateType.FAILED}


class ShardWait:
    """Polls the shards of one fleet run; `final` maps a shard index to (state type, message)."""

    def __init__(self, client: SyncPrefectClient, spec: SweepSpec, shards: list[Shard], runs: dict[int, UUID]):
        self.client, self.spec, self.runs = client, spec, runs
        self.shards = {shard.index: shard for shard in shards}  # a search shard's batch is one shard, not numbered 0
        self.by_id = {run_id: index for index, run_id in runs.items()}
        self.final: dict[int, tuple[str, str]] = {}
        self.offline_since: dict[str, float] = {}
        self.retry_due_since: dict[int, float] = {}

    def until_done(self, pools: dict[str, str], retries: int) -> dict[int, tuple[str, str]]:
        while len(self.final) < len(self.shards):
            unstarted = self.poll(retries)
            for family, waiting in unstarted.items():
                self.cancel_if_no_worker(family, pools[family], waiting)
            if len(self.final) < len(self.shards):
                time.sleep(POLL_SECONDS)
        return self.final

    def poll(self, retries: int) -> dict[str, list[FlowRun]]:
        """Record the shards that are final; returns the unstarted ones by family."""
        pending = [self.runs[i] for i in self.runs if i not in self.final]
        unstarted: dict[str, list[FlowRun]] = {}
        for run in self.client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=pending))):
            index = self.by_id[run.id]
            state = run.state
            if state is not None and state.is_final() and not self.retry_coming(index, run, retries):
                self.final[index] = (state.type.value, state.message or "")
            elif state is None or state.type in _UNSTARTED:
                unstarted.setdefault(self.shards[index].family, []).append(run)
        return unstarted

    def retry_coming(self, index: int, run: FlowRun, retries: int) -> bool:
        """A crashed or failed shard the retry automation will schedule again (and has not yet)."""
        if run.state is None or run.state.type not in _RETRIED or run.run_count > retries:
            self.retry_due_since.pop(index, None)
            return False
        since = self.retry_due_since.setdefault(index, time.monotonic())
        return time.monotonic() - since < RETRY_GRACE_SECONDS

    def cancel_if_no_worker(self, family: str, pool: str, waiting: list[FlowRun]) -> None:
        if workers_online(self.client, pool):
            self.offline_since.pop(family, None)
            return
        since = self.offline_since.setdefault(family, time.monotonic())
        wait = self.spec.execution.worker_wait_seconds
        if time.monotonic() - since < wait:
            return
        message = (
            f"no {family} worker online in work pool {pool} for {wait:g} s (execution.worker_wait_seconds); start "
            f"one with `kernelsweep fleet worker --pool {pool}` and re-run this shard"
        )
        get_run_logger().error("%s (%d shards)", message, len(waiting))
        for run in waiting:
            self.client.set_flow_run_state(run.id, Cancelled(message=message), force=True)
            self.final[self.by_id[run.id]] = (StateType.CANCELLED.value, message)


def workers_online(client: SyncPrefectClient, pool: str) -> list[str]:
    """The names of the pool's workers Prefect counts as online (a recent heartbeat), for the fleet
    flow's wait and for `kernelsweep fleet status` alike."""
    online = WorkerFilter(status=WorkerFilterStatus(any_=["ONLINE"]))
    return sorted(w.name for w in client.read_workers_for_work_pool(pool, worker_filter=online))
