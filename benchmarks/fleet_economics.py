"""Fleet economics on the simulator: what a compile farm buys the Neuron hosts (issue 23).

    python benchmarks/fleet_economics.py                  # 32 MLP points, time scale 1; a few minutes
    python benchmarks/fleet_economics.py --points 64 --time-scale 0.5

The same points, twice, on simulated hosts that sleep the calibrated model's latencies (scaled):

  without the farm  one trn2 host (its cores, its compile slots) traces, compiles and captures every
                    point, as a fleet host does today;
  with the farm     compile hosts without a device (KERNELSWEEP_SIM_CORES=0) trace and compile the
                    points shard by shard into the shared artifact store, and each shard is handed to
                    the trn2 host the moment its NEFFs exist (the fleet flow's streaming,
                    kernelsweep.flows.fleet.farm), which finds them there and only captures.

Each host runs the real stages (kernelsweep.stages: the stand-in tools as processes, the artifact
store, the NeuronCore leases) on threads of this process, without Prefect: the server's cost per
point is benchmarks/fleetscale.py's subject, and here it would only blur the schedule. Printed side
by side: the Neuron host's busy fraction (time its cores held a capture lease, over its cores times
the span it was needed: from its first NEFF with the farm, the whole run without), Neuron- and
CPU-host-hours per 1,000 points, and wall / bound. The bound is the two-stage flow-shop bound over the
configured compile slots and capture cores and what the simulator was configured to sleep
(kernelsweep.sim.latency), never a time this run measured. Targets (with the farm): busy >= 80%, wall
/ bound <= 1.2; every figure is printed with the load average it was taken at.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from guard import load, verdict
from workloads import mlp_spec

from kernelsweep.chain import run_stages
from kernelsweep.locks import CoreLeaser
from kernelsweep.sim.config import sim_env
from kernelsweep.sim.latency import CAPTURE, COMPILE, lower_bound, read_latencies
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.stages import compile_stage, trace_stage
from kernelsweep.stores.artifacts import LocalArtifactStore
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext
from kernelsweep.toolchain.versions import collect

BUSY_TARGET, RATIO_TARGET = 0.80, 1.2
POOL_SLACK = 2  # threads beyond compile slots and cores, as kernelsweep.flows.points.measure runs a host's points


@dataclass(frozen=True)
class Fleet:
    cores: int = 2  # the trn2 host's logical NeuronCores (LNC=2)
    host_slots: int = 2  # its own compile slots, used without the farm
    farm_hosts: int = 2
    farm_slots: int = 5  # compile slots per farm host
    shard: int = 5  # points per shard: what one farm host compiles at once, then hands on
    time_scale: float = 1.0


@dataclass
class Tally:
    """What one mode's run did: capture-lease seconds, compiles on the Neuron host, spans."""

    capture_seconds: float = 0.0
    local_compiles: int = 0
    first_neff: float | None = None
    farm_spans: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def context(root: Path, name: str, store: Path, scale: float, cores: int, slots: int) -> StageContext:
    """A simulated host of its own (device state, leases, latency records), on the shared store."""
    env = sim_env(cores=cores, time_scale=float(scale), **({"platform": "trn2"} if cores else {}))
    toolchain = sim_toolchain(root / name / "sim", env=env)
    leasers = {2: CoreLeaser(root / name / "leases", list(range(cores)), lnc=2)} if cores else {}
    return StageContext(
        toolchain=toolchain,
        store=LocalArtifactStore(store),
        capture=mlp_spec(4, root, slots).capture,
        leasers=leasers,
        compile_slots=slots,
        versions=collect(toolchain, root / name / "probe"),
        host_name=name,
    )


def measure_point(ctx: StageContext, point: Point, tally: Tally) -> None:
    """One point's stages on a Neuron host, through the sweep's chain (a failed point fails the benchmark)."""
    record = run_stages(ctx, point)
    assert record is not None  # nothing stops this run
    if record.error is not None:
        raise record.error
    compiled, captured = record.compiled, record.captured
    assert compiled is not None and captured is not None
    with tally.lock:
        tally.capture_seconds += captured.seconds
        tally.local_compiles += not compiled.cache_hit


def without_farm(root: Path, points: list[Point], fleet: Fleet) -> tuple[float, float, Tally]:
    """(wall, the Neuron host's span, tally): the host compiles and captures its own points."""
    host = context(root, "trn2-a", root / "artifacts", fleet.time_scale, fleet.cores, fleet.host_slots)
    tally = Tally()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=fleet.host_slots + fleet.cores + POOL_SLACK) as pool:
        for future in [pool.submit(measure_point, host, p, tally) for p in points]:
            future.result()
    wall = time.monotonic() - started
    return wall, wall, tally


def with_farm(root: Path, points: list[Point], fleet: Fleet) -> tuple[float, float, Tally]:
    """(wall, the Neuron host's span from its first NEFF, tally): shards compile on the farm and
    stream to the Neuron host, which captures from the store."""
    store = root / "artifacts"
    host = context(root, "trn2-a", store, fleet.time_scale, fleet.cores, fleet.host_slots)
    farm = [
        context(root, f"compile-{i}", store, fleet.time_scale, 0, fleet.farm_slots) for i in range(fleet.farm_hosts)
    ]
    shards = [points[i : i + fleet.shard] for i in range(0, len(points), fleet.shard)]
    tally, todo, done = Tally(), list(reversed(shards)), []
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=fleet.host_slots + fleet.cores + POOL_SLACK) as capture:

        def compile_host(ctx: StageContext) -> None:
            began = time.monotonic()
            with ThreadPoolExecutor(max_workers=ctx.compile_slots) as slots:
                while True:
                    with tally.lock:
                        shard = todo.pop() if todo else None
                    if shard is None:
                        break
                    list(slots.map(lambda p: compile_stage(ctx, p, trace_stage(ctx, p)), shard))
                    with tally.lock:  # its NEFFs exist: the shard starts on the Neuron host
                        tally.first_neff = tally.first_neff or time.monotonic()
                        done.extend(capture.submit(measure_point, host, p, tally) for p in shard)
            tally.farm_spans.append(time.monotonic() - began)

        threads = [threading.Thread(target=compile_host, args=(ctx,)) for ctx in farm]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(done) == len(points), "a farm host failed: see its traceback above"
        for future in done:
            future.result()
    wall = time.monotonic() - started
    return wall, wall - ((tally.first_neff or started) - started), tally


def bound(root: Path, compile_slots: int, cores: int) -> tuple[float, float]:
    """The flow-shop bound from what every host's simulator was configured to sleep, and the sleeps'
    capture seconds."""
    compiles, captures = {}, {}
    for state in root.glob("*/sim"):
        for record in read_latencies(state):
            if record.tool == COMPILE:
                compiles[record.point] = record.slept_seconds
            elif record.tool == CAPTURE:
                captures[record.point] = captures.get(record.point, 0.0) + record.slept_seconds
    limit = lower_bound(list(compiles.values()), list(captures.values()), compile_slots, cores)
    return limit, sum(captures.values())


def report(
    name: str, points: int, wall: float, span: float, tally: Tally, limits: tuple[float, float], fleet: Fleet
) -> dict:
    """One mode's column. `limits`: the bound, and the capture seconds the simulator was told to sleep
    (what the leases held beyond it is tool start-up and CPU contention, not capturing)."""
    limit, slept = limits
    busy = tally.capture_seconds / (fleet.cores * span)
    return {
        "mode": name,
        "wall s": f"{wall:.1f}",
        "bound s": f"{limit:.1f}",
        "wall / bound": f"{wall / limit:.2f}",
        "Neuron busy": f"{busy:.0%}",
        "Neuron-host-h / 1k pts": f"{span / 3600 / points * 1000:.3f}",
        "CPU-host-h / 1k pts": f"{sum(tally.farm_spans) / 3600 / points * 1000:.3f}",
        "compiles on Neuron host": str(tally.local_compiles),
        "capture lease s / slept s": f"{tally.capture_seconds:.0f} / {slept:.0f}",
        "_busy": busy,
        "_ratio": wall / limit,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=32, help="MLP points (4 x a power of two)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="simulated seconds slept per modelled second")
    args = parser.parse_args()
    fleet = Fleet(time_scale=args.time_scale)
    print(f"== Fleet economics: {args.points} MLP points, time scale {fleet.time_scale:g} ({load()})")
    print(
        f"trn2 host: {fleet.cores} cores, {fleet.host_slots} compile slots; farm: {fleet.farm_hosts} CPU hosts x "
        f"{fleet.farm_slots} compile slots, shards of {fleet.shard} points"
    )
    rows = []
    for name, run, slots in (("without farm", without_farm, fleet.host_slots), ("with farm", with_farm, None)):
        with tempfile.TemporaryDirectory(prefix="kernelsweep-economics-") as tmp:
            root = Path(tmp)
            points = list(_points(root, args.points))
            wall, span, tally = run(root, points, fleet)
            limits = bound(root, slots or fleet.farm_hosts * fleet.farm_slots, fleet.cores)
            rows.append(report(name, len(points), wall, span, tally, limits, fleet))
        print(f"  {name}: done ({load()})")
    keys = [k for k in rows[0] if not k.startswith("_")]
    print(f"{'':<27}" + "".join(f"{row['mode']:>16}" for row in rows))
    for key in keys[1:]:
        print(f"{key:<27}" + "".join(f"{row[key]:>16}" for row in rows))
    farm = rows[1]
    busy = verdict(farm["_busy"], BUSY_TARGET, below=False)
    print(f"with farm, Neuron busy since the first NEFFs {farm['Neuron busy']} {busy}")
    print(f"with farm, wall / bound {farm['wall / bound']} {verdict(farm['_ratio'], RATIO_TARGET)}")


def _points(root: Path, count: int) -> list[Point]:
    from kernelsweep.sweepspec.expansion import expand

    with contextlib.suppress(FileExistsError):
        (root / "artifacts").mkdir(parents=True)
    return expand(mlp_spec(count, root, 2))


if __name__ == "__main__":
    main()
