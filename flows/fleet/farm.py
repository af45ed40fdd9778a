"""The fleet run through the compile farm: a pipeline, not two phases.

Every shard's points go first to the `compile-shard` deployment (the `kernelsweep-compile` pool's
CPU hosts); the moment a shard's compile run is over, its capture shard is submitted to its
family's pool, so the Neuron hosts start capturing as soon as the first shard's NEFFs exist and
the farm keeps compiling the next ones meanwhile. A compile run that crashed is retried by the
server like any shard (kernelsweep.flows.fleet.automations) and waited for; one that failed for good,
or was cancelled because the farm had no worker for `execution.worker_wait_seconds`, still
releases its capture shard: that shard compiles what the store lacks itself, and its rows say so
(`neff_compile_host`).

The farm is used while a worker is online in its pool (and its deployment exists) when the fleet
run starts; without one the fleet runs as it always did.

A search shard's trials exist only once its studies propose them, so it cannot be streamed like this:
it sends each batch of proposed trials to the same deployment and waits for that compile run
(`compile_batch`), retries and a missing worker treated as above, then captures the batch.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from uuid import UUID

from prefect import get_client, get_run_logger
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run

from kernelsweep.fleet import Shard
from kernelsweep.fleet.farm import COMPILE_DEPLOYMENT, COMPILE_POOL, family_sdks
from kernelsweep.flows.fleet.automations import retries_installed
from kernelsweep.flows.fleet.setup import reported_hosts
from kernelsweep.flows.fleet.wait import POLL_SECONDS, ShardWait, workers_online
from kernelsweep.sweepspec import SweepSpec


def farm_online(client: SyncPrefectClient) -> bool:
    """Whether this fleet run compiles on the farm: its deployment exists and a worker serves its pool."""
    try:
        client.read_deployment_by_name(COMPILE_DEPLOYMENT)
    except ObjectNotFound:
        return False
    return bool(workers_online(client, COMPILE_POOL))


def stream(
    client: SyncPrefectClient, spec: SweepSpec, shards: list[Shard], queue: str, retries: int,
    capture: Callable[[Shard], UUID],
) -> dict[int, UUID]:  # fmt: skip
    """Compile every shard on the farm, submitting each capture shard (`capture`) as soon as its compile
    run is final; returns the capture runs by shard index, once every one is submitted."""
    sdks = family_sdks(reported_hosts(client))
    compiles = {s.index: _submit_compile(spec, s, queue, sdks.get(s.family), str(flow_run.id)) for s in shards}
    get_run_logger().info("fleet %s: %d shards compiling on the farm (%s)", spec.name, len(shards), COMPILE_POOL)
    wait = ShardWait(client, spec, shards, compiles)
    captures: dict[int, UUID] = {}
    while len(captures) < len(shards):
        unstarted = wait.poll(retries)
        for index in sorted(set(wait.final) - set(captures)):
            captures[index] = capture(shards[index])
        waiting = [run for runs in unstarted.values() for run in runs]
        if waiting:
            wait.cancel_if_no_worker("compile", COMPILE_POOL, waiting)
        if len(captures) < len(shards):
            time.sleep(POLL_SECONDS)
    return captures


def farm_or_here(
    spec: SweepSpec, shard: Shard, what: str, expect: dict[str, str | None] | None, fleet_run_id: str | None,
    toolchain_env: dict[str, str] | None = None, kind: str = "search",
) -> None:  # fmt: skip
    """`shard`'s points compiled on the farm while it is online (compile_batch, the same arguments). A farm
    that is down, or whose compile run did not complete, leaves them to this host, which compiles what the
    store lacks (its rows' `neff_compile_host` say so); `what` names the points in the log."""
    with get_client(sync_client=True) as client:
        online = farm_online(client)
    if not online:
        get_run_logger().info("no compile farm online: this host compiles %s", what)
        return
    state, message = compile_batch(spec, shard, expect, fleet_run_id, toolchain_env, kind)
    if state != StateType.COMPLETED.value:
        get_run_logger().warning("the farm's compile run of %s ended %s (%s): this host compiles what it left",
                                 what, state.lower(), message)  # fmt: skip


def compile_batch(
    spec: SweepSpec, shard: Shard, expect: dict[str, str | None] | None, fleet_run_id: str | None,
    toolchain_env: dict[str, str] | None = None, kind: str = "search",
) -> tuple[str, str]:  # fmt: skip
    """Compile a batch of points (`shard.points`: a search shard's trials, `shard.index` the search shard's;
    or a bisection step's point) on the farm and wait until its compile run is final, the server's retries
    included: (state type, message). Its compile run goes to the queue this flow run came from, tagged
    `kind`; `expect` is the compiler and NKI to hold the compile host to, `toolchain_env` the SDK build
    to compile as (compile_shard's). The batch is its points and its build: each build's is a run of its own."""
    built_as = " ".join(f"{k}={v}" for k, v in sorted((toolchain_env or {}).items()))
    key = " ".join([*sorted(p.point_id for p in shard.points), built_as])
    batch = hashlib.sha256(key.strip().encode()).hexdigest()[:16]  # without a build: the key it always had
    with get_client(sync_client=True) as client:
        queue = client.read_flow_run(UUID(str(flow_run.id))).work_queue_name or "urgent"
        run = _submit_compile(spec, shard, queue, expect, fleet_run_id, batch, toolchain_env, kind)
        wait = ShardWait(client, spec, [shard], {shard.index: run})
        return wait.until_done({shard.family: COMPILE_POOL}, retries_installed(client))[shard.index]


def _submit_compile(
    spec: SweepSpec, shard: Shard, queue: str, expect: dict[str, str | None] | None, fleet_run_id: str | None,
    batch: str | None = None, toolchain_env: dict[str, str] | None = None, kind: str = "search",
) -> UUID:  # fmt: skip
    """The compile run of a shard's points, or of one `batch` (compile_batch's)."""
    run = run_deployment(
        COMPILE_DEPLOYMENT,
        parameters={
            "spec": spec.model_dump(mode="json"),
            "points": [p.model_dump(mode="json") for p in shard.points],
            "shard": shard.index,
            "target": shard.family,
            "fleet_run_id": fleet_run_id,
            "expect": expect,
            **({"toolchain_env": toolchain_env} if toolchain_env else {}),
        },
        timeout=0,
        tags=["fleet", "compile", shard.family, *([kind] if batch else [])],
        idempotency_key=f"{flow_run.id}-compile-{batch or shard.index}",
        work_queue_name=queue,
    )
    assert isinstance(run, FlowRun)  # called from a sync flow: Prefect runs it to completion, not a coroutine
    return run.id
