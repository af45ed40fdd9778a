"""When SQLite stops being enough: N process workers draining sweeps from one Prefect server, on SQLite
and on PostgreSQL.

    python benchmarks/server_db.py [--workers 1,3,5,8] [--runs-per-worker 2] [--points 4]

For each database, one server (`prefect server start` with `kernelsweep server`'s settings; SQLite in
its home, or a throwaway PostgreSQL 15 cluster, benchmarks/servers.py) and, for each N, a fresh
process pool with N `prefect worker start` processes, each a simulated trn2 host of its own (own device
state and NeuronCore leases, zero simulated latency, the shipped unit's Prefect settings). N x R sweep
flow runs (R = --runs-per-worker, each its own small spec) are created at once from a deployment of
`kernelsweep.flows.sweep:sweep` on that pool; the workers drain them, one at a time each.

Printed per database and N, with the load average: the time to drain; flow runs that did not
complete; `database is locked` lines (the server's log and the workers' logs, which carry the flow
runs' output) and other ERROR lines there; and the API as a client sees it meanwhile: a probe reads
one flow run every half second (p50 / p95 / max latency, failed requests). Every point is zero-latency,
so the server sees the highest write rate these hosts make; the hosts themselves share this
machine's CPUs, so the drain time is theirs as much as the server's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from guard import load
from servers import Server, postgres, prefect_server
from workloads import Host, worker_env

from kernelsweep.flows.server import api_call, terminate_tree
from kernelsweep.sweepspec.load import parse_spec

HOST = Host(cores=2, compile_slots=1, time_scale=0.0)
PROBE_SECONDS = 0.5
DRAIN_TIMEOUT = 1800.0
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
LOCKED = "database is locked"


@dataclass
class Figure:
    database: str
    workers: int
    runs: int
    wall: float
    incomplete: dict[str, int]  # state -> flow runs that ended so
    locked: int
    errors: int
    latencies: list[float] = field(default_factory=list)
    failed_requests: int = 0  # the probe's reads the server refused or dropped
    refused: int = 0  # the benchmark's own requests the server answered 429/502/503 (retried)

    def line(self) -> str:
        lat = sorted(self.latencies) or [float("nan")]
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        bad = ", ".join(f"{n} {s.lower()}" for s, n in self.incomplete.items()) or "none"
        return (
            f"  {self.database:<10} {self.workers} worker(s): {self.runs} runs drained in {self.wall:6.1f} s; "
            f"not completed: {bad}; '{LOCKED}' lines: {self.locked}; other ERROR lines: {self.errors}; "
            f"API read latency p50 {statistics.median(lat) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
            f"max {lat[-1] * 1000:.0f} ms, failed reads {self.failed_requests}; requests refused (retried) "
            f"{self.refused}; {load()}"
        )


class Api:
    """The server's REST API, retried on what Prefect's client retries, the answers it refused counted."""

    def __init__(self, server: Server) -> None:
        self.server, self.refused, self._lock = server, 0, threading.Lock()

    def __call__(self, path: str, body: object = None) -> object:
        return api_call(self.server.api_url, path, body, timeout_seconds=60, refused=self._refused)

    def _refused(self, status: int) -> None:
        with self._lock:
            self.refused += 1


def _deployment(api: Api, pool: str) -> str:
    """A process pool and a deployment of the sweep flow on it (module entrypoint: nothing to pull)."""
    api("/work_pools/", {"name": pool, "type": "process"})
    flow = api("/flows/", {"name": "sweep"})
    body = {
        "name": pool,
        "flow_id": flow["id"],  # type: ignore[index]
        "entrypoint": "kernelsweep.flows.sweep:sweep",
        "work_pool_name": pool,
        "pull_steps": [],
        "path": ".",
    }
    return str(api("/deployments/", body)["id"])  # type: ignore[index]


def _spec(root: Path, name: str, points: int) -> dict:
    sizes = [2048 * (k + 1) for k in range(points)]
    spec = parse_spec(
        {
            "name": name,
            "platforms": ["trn2"],
            "toolchain": "sim",
            "results": str(root / "results"),
            "artifacts": str(root / "artifacts"),
            "capture": {"num_exec": 2},
            "kernels": [
                {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"], "grid": {"n": sizes}}
            ],
        }
    )
    return spec.model_dump(mode="json")


@contextmanager
def _workers(api: Api, root: Path, pool: str, count: int) -> Iterator[list[Path]]:
    logs, processes = [], []
    try:
        for i in range(count):
            log = root / f"worker-{i}.log"
            env = {**worker_env(), **HOST.env(root / f"host-{i}"), **api.server.client_env()}
            argv = [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--name", f"w{i}"]
            with log.open("wb") as handle:
                process = subprocess.Popen(
                    [*argv, "--limit", "1"], env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=root,
                    start_new_session=True,
                )  # fmt: skip
            processes.append(process)
            logs.append(log)
        _until(lambda: len(_online(api, pool)) == count, 300, f"{count} workers online")
        yield logs
    finally:
        for process in processes:
            terminate_tree(process, grace_seconds=5)


def _online(api: Api, pool: str) -> list[str]:
    workers = api(f"/work_pools/{pool}/workers/filter", {})
    return [w["name"] for w in workers if w["status"] == "ONLINE"]  # type: ignore[union-attr, index]


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1.0)


class Probe(threading.Thread):
    """Reads one flow run every PROBE_SECONDS, as the UI and the workers do all the time."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.server, self.stop, self.latencies, self.failed = server, threading.Event(), [], 0

    def run(self) -> None:
        while not self.stop.wait(PROBE_SECONDS):
            started = time.perf_counter()
            try:
                request = urllib.request.Request(
                    f"{self.server.api_url}/flow_runs/filter", data=b'{"limit": 1}',
                    headers={"Content-Type": "application/json"},
                )  # fmt: skip
                with urllib.request.urlopen(request, timeout=60) as answer:
                    answer.read()
                self.latencies.append(time.perf_counter() - started)
            except (urllib.error.URLError, OSError, ValueError):
                self.failed += 1


def _count(paths: list[Path], offsets: dict[Path, int]) -> tuple[int, int]:
    """`database is locked` lines and other ERROR lines written to `paths` after `offsets`."""
    locked = errors = 0
    for path in paths:
        with path.open("rb") as handle:
            handle.seek(offsets.get(path, 0))
            for line in handle.read().decode(errors="replace").splitlines():
                if LOCKED in line:
                    locked += 1
                elif "ERROR" in line:
                    errors += 1
    return locked, errors


def measure(server: Server, database: str, root: Path, workers: int, per_worker: int, points: int) -> Figure:
    pool = f"bench-{workers}"
    api = Api(server)
    deployment = _deployment(api, pool)
    server_log = server.home / "server.log"
    with _workers(api, root, pool, workers) as logs:
        offsets = {server_log: server_log.stat().st_size}
        probe = Probe(server)
        probe.start()
        started = time.perf_counter()
        ids = []
        for i in range(workers * per_worker):
            spec = _spec(root / f"run-{i}", f"db-{workers}-{i}", points)
            run = api(f"/deployments/{deployment}/create_flow_run", {"parameters": {"spec": spec}})
            ids.append(run["id"])  # type: ignore[index]
        states: dict[str, str] = {}

        def drained() -> bool:
            found = api("/flow_runs/filter", {"flow_runs": {"id": {"any_": ids}}, "limit": len(ids)})
            states.update({r["id"]: r["state"]["type"] for r in found})  # type: ignore[union-attr, index]
            return all(states.get(i) in FINAL for i in ids)

        _until(drained, DRAIN_TIMEOUT, f"{len(ids)} flow runs to finish")
        wall = time.perf_counter() - started
        probe.stop.set()
        probe.join()
        locked, errors = _count([server_log, *logs], offsets)
    incomplete: dict[str, int] = {}
    for state in states.values():
        if state != "COMPLETED":
            incomplete[state] = incomplete.get(state, 0) + 1
    figure = Figure(database, workers, len(ids), wall, incomplete, locked, errors, probe.latencies, probe.failed)
    figure.refused = api.refused
    return figure


@contextmanager
def sqlite_server(home: Path) -> Iterator[Server]:
    with prefect_server(home) as server:
        yield server


@contextmanager
def postgres_server(home: Path) -> Iterator[Server]:
    with postgres() as pg, prefect_server(home, database=pg) as server:
        yield server


DATABASES: dict[str, Callable[[Path], AbstractContextManager[Server]]] = {
    "SQLite": sqlite_server,
    "PostgreSQL": postgres_server,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,3,5,8", help="worker counts, comma-separated")
    parser.add_argument("--runs-per-worker", type=int, default=2)
    parser.add_argument("--points", type=int, default=4, help="zero-latency points per flow run")
    parser.add_argument("--databases", default="SQLite,PostgreSQL")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    print(f"== N process workers draining {args.runs_per_worker} sweep flow runs each ({args.points} zero-latency "
          f"points a run) from one Prefect server ({load()})", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="kernelsweep-serverdb-") as base:
        for database in args.databases.split(","):
            with DATABASES[database](Path(base) / database / "server") as server:
                for n in counts:
                    root = Path(base) / database / f"n{n}"
                    root.mkdir(parents=True)
                    print(measure(server, database, root, n, args.runs_per_worker, args.points).line(), flush=True)


if __name__ == "__main__":
    main()
