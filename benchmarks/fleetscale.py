"""Fleet scale: one Prefect server on PostgreSQL fed by N simulated hosts at once.

Each host is a child process running one zero-latency shard flow run (`sweep_shard`, as a fleet
worker runs it, with the worker unit's Prefect settings) on a simulated trn2 host of its own (its
own device state and NeuronCore leases); all N start together against one server with
`kernelsweep server`'s settings. Zero latency makes every point as cheap for the hosts as it can be,
so the server sees the highest point rate these hosts can make.

Measured per setup and N: the server's CPU per point, split by process (API, background services,
PostgreSQL, Redis; each one's idle rate taken off), and from it the points per second one server
core sustains (1 / CPU-seconds per point): the figure a fleet's server is sized by, since a point's
server CPU does not depend on how long its compile or capture takes. The points per second the
hosts reached is printed too, but on this machine it is bounded by the hosts' own CPU, not the
server's. Twice: one `prefect server start` process, and Prefect's documented multi-server setup
(two API processes on one address, the background services in a process of their own, PostgreSQL
and Redis through `prefect-redis`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from guard import load
from servers import Server, multi_server, postgres, prefect_server, redis, settle
from workloads import Host, mlp_spec, start_child, worker_env

HOST = Host(cores=4, compile_slots=2, time_scale=0.0)
IDLE_SECONDS = 6.0
# Quiet, for `settle`: each process of a setup (API, services, Redis, PostgreSQL) polls a little while
# idle (the multi-server setup idles at about 6% of a CPU in all), so the bar grows with their number.
IDLE_SHARE_PER_PROCESS = 0.03


@dataclass(frozen=True)
class FleetFigure:
    setup: str
    hosts: int
    points: int
    wall: float
    cpu_ms: dict[str, float]  # per point, by process

    @property
    def server_ms(self) -> float:
        return sum(self.cpu_ms.values())

    @property
    def per_core(self) -> float:
        """Points per second one server core sustains at this CPU per point."""
        return 1000.0 / self.server_ms if self.server_ms > 0 else float("inf")


@contextmanager
def one_process(home: Path) -> Iterator[Server]:
    with postgres() as pg, prefect_server(home, database=pg) as server:
        yield server


@contextmanager
def multi_process(home: Path) -> Iterator[Server]:
    with postgres() as pg, redis() as broker, multi_server(home, pg, broker) as server:
        yield server


SETUPS: dict[str, Callable[[Path], AbstractContextManager[Server]]] = {
    "one server process": one_process,
    "2 API + services + Redis": multi_process,
}


def section_fleet(base: Path, host_counts: list[int], points_per_host: int) -> list[FleetFigure]:
    print(f"\n== Fleet scale: one Prefect server on PostgreSQL, N simulated hosts at once, {points_per_host} "
          f"zero-latency points each ({load()})")  # fmt: skip
    figures = []
    for index, (setup, start) in enumerate(SETUPS.items()):
        with start(base / f"fleet-{index}") as server:
            _feed(server, base / f"fleet-{index}-warm-up", 1, 4)  # the server's first flow runs register the flows
            for hosts in host_counts:
                figure = _feed(server, base / f"fleet-{index}-{hosts}", hosts, points_per_host, setup)
                figures.append(figure)
                _print(figure)
    return figures


def _print(f: FleetFigure) -> None:
    parts = ", ".join(f"{name} {ms:.0f}" for name, ms in f.cpu_ms.items())
    rate = f.points / f.wall
    print(f"  {f.setup:<26} {f.hosts} host(s), {f.points} points in {f.wall:5.1f} s ({rate:5.1f} points/s): "
          f"server {f.server_ms:4.0f} ms CPU / point ({parts}) = {f.per_core:5.1f} points/s per server core; "
          f"{load()}")  # fmt: skip


def _feed(server: Server, root: Path, hosts: int, per_host: int, setup: str = "warm-up") -> FleetFigure:
    """`hosts` shard flow runs at once, each on a host of its own, against `server`."""
    total = hosts * per_host
    spec = mlp_spec(total, root, HOST.compile_slots, per_flow_run=total)
    idle = idle_rates(server)
    before, started = server.cpu_parts(), time.perf_counter()
    children = []
    for i in range(hosts):
        env = {**worker_env(), **HOST.env(root / f"host-{i}"), **server.client_env()}
        shard = {"index": i, "count": hosts, "start": i * per_host, "stop": (i + 1) * per_host}
        children.append(start_child("shard", spec, root / f"host-{i}", env, shard))
    results = [child.result() for child in children]
    wall = time.perf_counter() - started
    settle_server(server)
    spent = time.perf_counter() - started
    after = server.cpu_parts()
    failed = sum(r["failed"] for r in results)
    assert failed == 0, f"{failed} of {total} points failed"
    cpu_ms = {name: max(0.0, after[name] - before[name] - idle[name] * spent) / total * 1000 for name in after}
    return FleetFigure(setup, hosts, total, wall, cpu_ms)


def idle_rates(server: Server) -> dict[str, float]:
    """CPU-seconds per second of each process while nothing is sent to it (its loop services' polling)."""
    settle_server(server)
    before = server.cpu_parts()
    time.sleep(IDLE_SECONDS)
    after = server.cpu_parts()
    return {name: (after[name] - before[name]) / IDLE_SECONDS for name in after}


def settle_server(server: Server) -> None:
    settle(server.cpu_seconds, idle_share=IDLE_SHARE_PER_PROCESS * len(server.cpu_parts()))
