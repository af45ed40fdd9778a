"""`kernelsweep fleet status` marks a host gone once its heartbeat stops (issue 35): the review's killed
host was still listed online 6 s and 56 s after the kill, Prefect marking it offline only after three
missed beats. Judged from worker records as the server returns them, built in-process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from prefect.client.schemas.objects import Worker, WorkerStatus

from kernelsweep.flows.cli.fleet_status import host_cell, liveness

NOW = datetime(2026, 11, 28, 2, 30, tzinfo=UTC)


def _worker(name: str, silent: float, *, every: int | None = 30, status: WorkerStatus = WorkerStatus.ONLINE) -> Worker:
    """A worker whose last heartbeat came `silent` seconds before NOW, beating every `every` seconds."""
    beat = NOW - timedelta(seconds=silent)
    return Worker(name=name, work_pool_id=uuid4(), last_heartbeat_time=beat, heartbeat_interval_seconds=every,
                  status=status)  # fmt: skip


def test_a_worker_is_gone_once_a_beat_is_missed_outright_though_prefect_still_says_online():
    workers = [
        _worker("trn2-b", 25),  # between beats
        _worker("trn2-a", 61),  # killed: two intervals without a beat, Prefect's status still ONLINE
        _worker("trn2-c", 50, every=None),  # no interval reported: Prefect's 30 s
        _worker("fast", 12, every=5),  # a 5 s heartbeat missed twice, but within the floor
        _worker("stopped", 400, status=WorkerStatus.OFFLINE),  # stopped on purpose: gone too
        _worker("retired", 2 * 86400, status=WorkerStatus.OFFLINE),  # gone for days: history
    ]
    online, gone = liveness(workers, NOW)
    assert online == ["fast", "trn2-b", "trn2-c"]
    assert gone == {"stopped": "silent 400 s", "trn2-a": "silent 61 s"}


def test_a_running_shard_on_a_gone_host_says_so():
    labels = {"kernelsweep.host": "trn2-a", "kernelsweep.family": "trn2"}
    assert host_cell(labels, {"trn2-a": "silent 61 s"}) == "trn2-a (gone, silent 61 s)"
    assert host_cell(labels, {"trn2-b": "silent 99 s"}) == "trn2-a"
    assert host_cell({}, {}) == "-"
