"""The `compile-shard` flow: a shard's points traced and compiled on a compile host (kernelsweep.fleet.farm).

It runs in the `kernelsweep-compile` pool, on CPU-only hosts. Each point's trace and compile are the
sweep's own chain and stage tasks, ended after the compile (so Prefect records them per point, and the
cache entries they write are the ones a capture host looks up), bounded by the host's compile slots.
Nothing is measured, so there is no row and no journal: the artifact store is the record. A retried
compile shard (the server's shard retries: a host that died mid-shard) finds the points an earlier
attempt finished in the store and compiles only the rest. A point that fails to compile is left for its
capture shard, which meets the same failure and records it as the point's row.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor

from prefect import flow, get_run_logger

from kernelsweep.chain import run_stages
from kernelsweep.errors import UsageError
from kernelsweep.fleet import prepare_compile, sdk_mismatch
from kernelsweep.flows.chain import as_task
from kernelsweep.flows.fleet.shard import refuse, report_host
from kernelsweep.flows.settings import locations_from_env
from kernelsweep.flows.stopping import stoppable
from kernelsweep.platforms import PlatformName
from kernelsweep.stores import probe_location
from kernelsweep.sweepspec import Point, SweepSpec
from kernelsweep.this_host import StageContext

COMPILED, STORED, FAILED, SKIPPED = "compiled", "in the store already", "failed", "not started (stopping)"


@flow(name="compile-shard", flow_run_name="compile-{spec.name}-{target}-{shard}")
def compile_shard(
    spec: SweepSpec,
    points: list[Point],
    shard: int,
    target: PlatformName,
    fleet_run_id: str | None = None,
    expect: dict[str, str | None] | None = None,
    toolchain_env: dict[str, str] | None = None,
) -> str:
    """Trace and compile shard `shard`'s points for `target` into the artifact store; capture nothing.

    Args:
        spec: The whole sweep (locations, toolchain, execution settings).
        points: This shard's points, all of platform family `target` (trn1, trn2 or inf2).
        shard: The capture shard these NEFFs are for.
        target: The family the points run on: its compiler target and LNC.
        fleet_run_id: The fleet run that started this shard.
        expect: The compiler and NKI versions the family's hosts last reported; another SDK here refuses.
        toolchain_env: The SDK build to compile with, as variables of the toolchain's tools (a bisection
            step's simulated build, kernelsweep.bisect.axis); None: this host's own SDK.
    """
    log = get_run_logger()
    others = sorted({p.platform for p in points} - {target})
    if others:
        raise UsageError(f"compile shard {shard} is for {target} but holds {', '.join(others)} points")
    probe_location(spec.artifacts_location, "artifact store", "the spec's `artifacts`")
    with stoppable() as stop:
        ctx = prepare_compile(spec, locations_from_env(), stop, toolchain_env)
        host = report_host(ctx)
        problem = sdk_mismatch(host.host, target, host.versions, expect)
        if problem:
            refuse(host.host, "compile-sdk", problem)
        outcomes = compile_points(ctx, points)
    counts = {kind: sum(1 for o in outcomes if o == kind) for kind in (COMPILED, STORED, FAILED, SKIPPED)}
    message = f"{target} shard {shard} on {host.host}: " + ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    log.info(message)
    return message


def compile_points(ctx: StageContext, points: list[Point]) -> list[str]:
    """Each point traced and compiled, as many at once as the host has compile slots, and as many
    more starting their trace workers while they wait for one (toolchain.process.Slots)."""
    with ThreadPoolExecutor(
        max_workers=max(1, min(len(points), 2 * ctx.compile_slots)), thread_name_prefix="compile"
    ) as pool:
        # Each point in a copy of the flow's context, taken here in the flow's thread (a copy taken in the
        # pool's thread has no flow run: its tasks ran outside the flow, and a failure's warning raised).
        futures = [pool.submit(contextvars.copy_context().run, _compile_one, ctx, p) for p in points]
        return [future.result() for future in futures]


def _compile_one(ctx: StageContext, point: Point) -> str:
    record = run_stages(ctx, point, as_task, compile_only=True)
    if record is None:
        return SKIPPED
    if record.error is not None or record.compiled is None:  # its capture shard meets it again and records it
        get_run_logger().warning("%s: %s (left for its capture shard, which records it)", point.point_id, record.error)
        return FAILED
    return STORED if record.compiled.cache_hit else COMPILED
