"""One measured sweep in a process of its own, so its CPU is its own: `python sweep_child.py MODE JOB`.

The parent sets the environment (simulated host, Prefect API URL) and reads the JSON this writes to
JOB's "out" file. Modes, all on the simulated toolchain through the production adapters:

  flow        the sweep flow exactly as `kernelsweep run` runs it (kernelsweep.flows.embedded.run_sweep:
              a worker thread, Prefect's loggers quiet) against the API URL the parent set; the parent
              sets the command's own Prefect settings (QUIET_PREFECT)
  shard       the public `sweep_shard` flow on the job's slice of points: one of several flow runs at
              once on a host, as a worker running several shards at once does (the parent sets the
              worker unit's Prefect settings)
  stages      the same points through the same five stage functions on the same kind of thread pool,
              then rows and the Parquet write, without Prefect: our own code's CPU
  sequential  seed 000's method: trace + compile every point, then capture and extract them one by one
  floor       Prefect's own floor: a chain of five no-op tasks per point (with the stage tasks' options)
              on the same kind of thread pool, each thread in a copy of the flow's context taken in the
              flow's thread, as flows/sweep.py does (so the tasks belong to the flow run)

CPU is counted around the sweep only (not the interpreter's start or imports): `self` is this
process (Prefect's client and our code; our code alone in `stages`), `children` the tool processes.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime
from pathlib import Path

from threadpoolctl import threadpool_limits

from kernelsweep import chain as point_chain
from kernelsweep import stages
from kernelsweep.results.journal import begin, plan_resume, run_key
from kernelsweep.results.rows import Row, build_row
from kernelsweep.results.writer import write_results
from kernelsweep.sim import template
from kernelsweep.sim.config import SimConfig
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import Locations, prepare

POOL_SLACK = 2  # as the flow's pool: compile slots + cores + 2
RUN_ID = "00000000-0000-4000-8000-000000000000"  # stands in for a flow run id
PACE_SECONDS = 0.05  # a floor task sleeps this long, so the pool paces tasks as a sweep does instead of racing


def _cpu() -> tuple[float, float]:
    """This process's CPU, and its tools': the waited-for children's and the simulated tools' template's."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + template.cpu_seconds()


def _locations() -> Locations:
    env = os.environ
    return Locations(sim_state_dir=SimConfig.from_env().state_dir, lock_dir=Path(env["KERNELSWEEP_LOCK_DIR"]))


def run_stages(spec: SweepSpec, points: list[Point], first: list[float], started: float) -> list[str]:
    """What the flow's own code does around the stages too: a journal entry per row, then the objects."""
    ctx, _ = prepare(spec, _locations())
    workers = ctx.compile_slots + ctx.capture_slots + POOL_SLACK
    fresh = plan_resume(spec.results, run_key(spec), [])
    journal = begin(spec.results, fresh, RUN_ID, date.today(), spec.name, datetime.now(UTC))

    def chain(point: Point) -> Row:
        record = point_chain.run_stages(ctx, point)
        assert record is not None  # nothing stops this run
        row = build_row(
            record, flow_run_id=RUN_ID, toolchain=ctx.toolchain.kind, is_simulation=ctx.toolchain.is_simulation,
            versions=ctx.versions,
        )  # fmt: skip
        journal.record(point, row)
        first.append(time.perf_counter() - started)
        return row

    with (
        threadpool_limits(limits=1, user_api="blas"),
        ThreadPoolExecutor(max_workers=min(len(points), workers)) as pool,
    ):
        rows = list(pool.map(chain, points))  # one BLAS thread per call, as the flow's pool runs them
    write_results(rows, spec.results, flow_run_id=RUN_ID, run_date=date.today(), lineage={"sweep": spec.name})
    journal.close()
    return [r.status for r in rows]


def run_sequential(spec: SweepSpec, points: list[Point], first: list[float], started: float) -> list[str]:
    ctx, _ = prepare(spec, _locations())
    compiled = []
    for point in points:
        traced = stages.trace_stage(ctx, point)
        compiled.append((point, stages.compile_stage(ctx, point, traced)))
    statuses = []
    for point, neff in compiled:
        inputs = stages.inputs_stage(ctx, point)
        captured = stages.capture_stage(ctx, point, neff, inputs)
        stages.extract_stage(ctx, point, neff, inputs, captured)
        first.append(time.perf_counter() - started)
        statuses.append("ok")
    return statuses


def run_flow(spec: SweepSpec, points: list[Point], first: list[float], started: float, shard: dict | None) -> list[str]:
    from kernelsweep.flows import embedded
    from kernelsweep.flows.progress import subscribe
    from kernelsweep.flows.sweep import sweep_shard

    def on_row(row: object) -> None:
        first.append(time.perf_counter() - started)

    if shard is None:  # as `kernelsweep run` with PREFECT_API_URL set
        report = embedded.run_sweep(spec, on_row, api=embedded.PrefectApi())
    else:
        with subscribe(on_row):
            report = sweep_shard(spec, points, shard["index"], shard["count"])
    return [row.status for row in report.rows]


def run_floor(spec: SweepSpec, points: list[Point], first: list[float], started: float) -> list[str]:
    import contextvars

    from prefect import flow, task

    from kernelsweep.tasks.policy import STAGE_TASK_OPTIONS

    @task(name="noop", **STAGE_TASK_OPTIONS)  # no cache key, no persisted result: as the stage tasks
    def noop(value: int) -> int:
        time.sleep(PACE_SECONDS)
        return value

    @flow(name="bare-chains")
    def bare_chains(count: int, workers: int) -> None:
        def chain(i: int) -> None:
            value = i
            for _ in range(5):  # one per stage
                value = noop(value)
            first.append(time.perf_counter() - started)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            # Each copy taken here, in the flow's thread: it holds the flow run and its client. A copy
            # taken inside the pool's thread would hold neither, and the tasks would run as orphans.
            futures = [pool.submit(contextvars.copy_context().run, chain, i) for i in range(count)]
            for future in futures:
                future.result()

    cores = SimConfig.from_env().cores
    bare_chains(len(points), min(len(points), (spec.execution.compile_slots or 1) + cores + POOL_SLACK))
    return ["ok"] * len(points)


def main(mode: str, job_file: str) -> None:
    job = json.loads(Path(job_file).read_text())
    spec = SweepSpec.model_validate(job["spec"])
    points = expand(spec)
    shard = job.get("shard")
    if shard is not None:
        points = points[shard["start"] : shard["stop"]]
    if mode in ("flow", "shard", "floor"):
        # Prefect imported and started before the clock, as a worker's flow run process has it: `import
        # prefect` alone is lazy, and the first `from prefect import flow` would set up its logging inside
        import prefect.main  # noqa: F401
    first: list[float] = []
    cpu_before = _cpu()
    started = time.perf_counter()
    if mode in ("flow", "shard"):
        statuses = run_flow(spec, points, first, started, shard if mode == "shard" else None)
    elif mode == "stages":
        statuses = run_stages(spec, points, first, started)
    elif mode == "floor":
        statuses = run_floor(spec, points, first, started)
    else:
        statuses = run_sequential(spec, points, first, started)
    wall = time.perf_counter() - started
    cpu_after = _cpu()
    result = {
        "wall": wall,
        "first_point": min(first) if first else None,
        "self_cpu": cpu_after[0] - cpu_before[0],
        "children_cpu": cpu_after[1] - cpu_before[1],
        "points": len(statuses),
        "failed": sum(s != "ok" for s in statuses),
    }
    Path(job["out"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:3])
