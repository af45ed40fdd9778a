"""A fleet's load on a Prefect server without running a fleet: one point's recorded API calls,
replayed from many light asyncio clients at once.

    python benchmarks/server_replay.py record            # re-record benchmarks/point_calls.json
    python benchmarks/server_replay.py run               # the sizing table: 10 50 100 200 hosts' worth
    python benchmarks/server_replay.py run --hosts 100 --setups postgres scaled-out
    python benchmarks/server_replay.py run --hosts 100 --commands prefect kernelsweep   # the launcher's fix beside

`record` starts a server (SQLite, `kernelsweep server`'s settings) behind a recording proxy and runs
`kernelsweep run` on a 32-point spec through it, as a fleet host runs a shard of
`max_points_per_flow_run` points (the worker unit's Prefect settings, the simulator at zero latency);
every HTTP call and every message the client sent on the events websocket is kept, then cut
(replay_calls.py) into the flow run's calls before its first point (create the run, its states) and
after (the results' store task, artifacts, the final state), and one point's own: the events of its
five stage task runs (tasks/*.py). Each part is templated into the fixture.

`run` replays that fixture against each setup (benchmarks/servers.py: one `prefect server start` on
SQLite or PostgreSQL, or Prefect's scaled-out setup with two API processes, or `scaled-out-1` with
one) from one asyncio client per host, each with one HTTP connection pool and one events websocket,
replaying points back to back with no pause. The
points are dealt out in flow runs of the recording's 32, in the order hosts take them: the host that
takes a run's first point opens the run, its other points wait for that, and the host that finishes
its last closes it, so a point carries its own calls and 1/32 of its flow run's, as in a fleet's
shard. N hosts' worth is N points in flight at once, more than N real hosts keep in flight (a real point spends
seconds compiling and capturing between its calls), so the server is what saturates. Printed per
setup and N: the server's CPU per point by process (its idle rate taken off), points per second per
server core (1 / CPU-seconds per point), the API latency p50/p95/p99 over all HTTP calls, the calls
that failed (a status other than the recorded one, an id not where it was, a refused connection),
the load generator's own CPU per point, and the load average. Needs Debian's `postgresql` and
`redis-server` and the `test` extra (`prefect-redis`), as fleetscale.py does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import uvicorn
import websockets
from fleetscale import idle_rates, settle_server
from guard import load
from replay_calls import Exchange, Fixture, PointIds, Step, dump, load_fixture, split_shard
from servers import Server, multi_server, postgres, prefect_server, redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets import Subprotocol
from workloads import Host, worker_env

from kernelsweep.flows import server as launcher
from kernelsweep.flows.server import API_RETRIES, LOOPBACK, RETRIED_STATUSES, free_port

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "point_calls.json"
RECORD_COMMAND = "python benchmarks/server_replay.py record"
HOST = Host(cores=4, compile_slots=2, time_scale=0.0)
SHARD_SPEC = """name = "replay-recording"
platforms = ["trn2"]
toolchain = "sim"

[execution]
max_points_per_flow_run = 32

[[kernels]]
kernel = "kernelsweep.kernels.mlp:mlp"
dtypes = ["bfloat16", "float16"]
grid = { s = [128, 256], h = [1024, 1152], i = [512, 640, 768, 896] }
"""
POINT_TASKS = {"trace", "compile", "inputs", "capture", "extract"}  # a point's stage tasks, tasks/*.py
ANONYMOUS_AUTH = json.dumps({"type": "auth", "token": None})  # a server without auth takes it
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding", "content-encoding"}


# --- recording -------------------------------------------------------------------------------------


def recording_proxy(upstream: str, seen: list[Exchange]) -> Starlette:
    """A pass-through proxy to `upstream` (http://host:port) that appends every call to `seen`."""
    client = httpx.AsyncClient(base_url=upstream, timeout=120)

    async def http(request: Request) -> Response:
        started = time.monotonic()
        body = await request.body()
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        answer = await client.request(request.method, path, content=body, headers=headers)
        seen.append(Exchange("http", started, request.method, path, body.decode(errors="replace"),
                             answer.status_code, answer.text))  # fmt: skip
        back = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        return Response(answer.content, answer.status_code, back)

    async def socket(ws: WebSocket) -> None:
        offered = [Subprotocol(p) for p in ws.scope.get("subprotocols", [])]
        target = upstream.replace("http", "ws", 1) + ws.url.path
        async with websockets.connect(target, subprotocols=offered or None) as up:
            await ws.accept(subprotocol=up.subprotocol)

            async def outward() -> None:
                while (frame := await ws.receive())["type"] == "websocket.receive":
                    message = frame.get("text") or frame.get("bytes", b"").decode()
                    seen.append(Exchange("ws", time.monotonic(), "WS", ws.url.path, message))
                    await up.send(message)

            async def inward() -> None:
                async for message in up:
                    await ws.send_text(message if isinstance(message, str) else message.decode())

            tasks = [asyncio.create_task(outward()), asyncio.create_task(inward())]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", http, methods=methods), WebSocketRoute("/{path:path}", socket)])


@contextmanager
def proxy(upstream: str, seen: list[Exchange]) -> Iterator[str]:
    """The recording proxy on a free loopback port, in a thread; yields its API URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(recording_proxy(upstream, seen), host=LOOPBACK, port=port,
                                           log_level="warning"))  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://{LOOPBACK}:{port}/api"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def points_of(calls: list[Exchange]) -> list[str | None]:
    """The point each call belongs to (None: the flow run's own): a call belongs to a point when it
    sends an event of one of its stage task runs. A stage task run is named `<stage>-<point id>`
    (tasks/*.py) from its Running state on; its Pending event still carries Prefect's placeholder
    name, so each task run's point is read from the last name it was sent under."""
    events = [_task_run_event(call) for call in calls]
    names = {task_run: name for task_run, name in filter(None, events)}
    owners: list[str | None] = []
    for event in events:
        stage, _, point = names[event[0]].partition("-") if event else ("", "", "")
        owners.append(point if stage in POINT_TASKS else None)
    return owners


def _task_run_event(call: Exchange) -> tuple[str, str] | None:
    """The task run id and the task run's name, when `call` sends a task-run event."""
    return _task_run_of(call.body) if call.kind == "ws" else None


def _task_run_of(message: str) -> tuple[str, str] | None:
    """The task run id and name a websocket message's task-run event is about; None for any other."""
    with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
        event = json.loads(message)
        if event["event"].startswith("prefect.task-run."):
            resource = event["resource"]
            return resource["prefect.resource.id"].removeprefix("prefect.task-run."), resource["prefect.resource.name"]
    return None


def record(base: Path) -> Fixture:
    """A 32-point shard of `kernelsweep run` through the proxy; its calls, cut and templated."""
    seen: list[Exchange] = []
    spec = base / "shard.toml"
    spec.write_text(SHARD_SPEC)
    with prefect_server(base / "server") as server, proxy(f"http://{LOOPBACK}:{server.port}", seen) as url:
        env = {**worker_env(), **HOST.env(base / "host"), "PREFECT_API_URL": url, "PREFECT_HOME": str(base / "client")}
        argv = [str(Path(sys.executable).parent / "kernelsweep"), "run", str(spec), "--results", str(base / "results"),
                "--artifacts", str(base / "artifacts")]  # fmt: skip
        run = subprocess.run(argv, env=env, cwd=base, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise SystemExit(f"the recording run failed ({run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return split_shard(seen, points_of)


# --- replay ----------------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)  # seconds, every HTTP call
    errors: dict[str, int] = field(default_factory=dict)
    retries: int = 0  # calls refused and tried again, as Prefect's client does
    points: int = 0
    task_runs: set[str] = field(default_factory=set)  # the task runs whose events were sent

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


@dataclass
class FlowRun:
    """One replayed flow run: opened by the host that takes its first point, closed by the one that
    finishes its last."""

    size: int
    ids: PointIds = field(default_factory=PointIds)
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    finished: int = 0


class Shards:
    """`total` points dealt out in flow runs of `per_run` (the last one smaller), in the order taken."""

    def __init__(self, total: int, per_run: int) -> None:
        self.per_run = per_run
        self.runs = [FlowRun(min(per_run, total - start)) for start in range(0, total, per_run)]
        self.taken = 0

    def take(self) -> tuple[FlowRun, bool]:
        """The run of the next point, and whether that point is its first."""
        run = self.runs[self.taken // self.per_run]
        first = self.taken % self.per_run == 0
        self.taken += 1
        return run, first


async def replay_host(api: str, fixture: Fixture, shards: Shards, points: int, tally: Tally) -> None:
    """One host's worth: `points` points one after another on one connection pool and one websocket."""
    base = api.removesuffix("/api")
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=httpx.Limits(max_connections=4)) as client:
        sockets: dict[str, websockets.ClientConnection] = {}

        async def replay(steps: list[Step], ids: PointIds) -> None:
            await _replay_steps(client, sockets, base, steps, ids, tally)

        try:
            for _ in range(points):
                run, first = shards.take()
                if first:
                    run.ids = PointIds()  # its clock starts now
                    await replay(fixture.run_open, run.ids)
                    run.opened.set()
                await run.opened.wait()
                await replay(fixture.point, run.ids.section())
                tally.points += 1
                run.finished += 1
                if run.finished == run.size:
                    await replay(fixture.run_close, run.ids.section())
        finally:
            for ws in sockets.values():
                await ws.close()


async def _replay_steps(
    client: httpx.AsyncClient,
    sockets: dict[str, websockets.ClientConnection],
    base: str,
    steps: list[Step],
    ids: PointIds,
    tally: Tally,
) -> None:
    for step in steps:
        body = ids.fill(step.body)
        if step.kind == "ws":
            try:
                await _send(sockets, base, step.path, body)
            except (OSError, websockets.WebSocketException) as exc:
                tally.error(f"WS {step.route}: {type(exc).__name__}")
                sockets.pop(step.path, None)
                continue
            if (event := _task_run_of(body)) is not None:
                tally.task_runs.add(event[0])
            continue
        try:
            answer = await _call(client, step.method, ids.fill(step.path), body, tally)
        except httpx.HTTPError as exc:
            tally.error(f"{step.method} {step.route}: {type(exc).__name__}")
            continue
        if answer.status_code // 100 != step.status // 100:  # an upsert's 200 is its first call's 201
            tally.error(f"{step.method} {step.route}: {answer.status_code} (recorded {step.status})")
        elif not ids.bind(step, answer.text):
            tally.error(f"{step.method} {step.route}: an id not where it was recorded")


async def _call(client: httpx.AsyncClient, method: str, path: str, body: str, tally: Tally) -> httpx.Response:
    """One call as Prefect's client makes it: a refused one (429, 502, 503: a locked SQLite is a 503)
    is tried again after 2**attempt seconds, up to its default retries; each try's latency is kept."""
    headers = {"content-type": "application/json"} if body else {}
    for attempt in range(1, API_RETRIES + 2):
        started = time.perf_counter()
        answer = await client.request(method, path, content=body or None, headers=headers)
        tally.latencies.append(time.perf_counter() - started)
        if answer.status_code not in RETRIED_STATUSES or attempt > API_RETRIES:
            return answer
        tally.retries += 1
        await asyncio.sleep(2**attempt)
    raise AssertionError("unreachable: the last attempt returns")


async def _send(sockets: dict[str, websockets.ClientConnection], base: str, path: str, message: str) -> None:
    """A message on the host's socket for `path`, opened (Prefect's subprotocol, its auth handshake
    answered: with the recorded auth message when that is the one to send, else with an anonymous
    one, as the recorded client sent) on first use; the recorded run authenticated each connection it
    opened, a host whose connection stays open does so once."""
    if path not in sockets:
        ws = await websockets.connect(base.replace("http", "ws", 1) + path, subprotocols=[Subprotocol("prefect")])
        await ws.send(message if _is_auth(message) else ANONYMOUS_AUTH)
        answer = json.loads(await ws.recv())
        if answer.get("type") != "auth_success":
            raise websockets.InvalidHandshake(f"auth refused: {answer}")
        sockets[path] = ws
    if not _is_auth(message):
        await sockets[path].send(message)


def _is_auth(message: str) -> bool:
    with contextlib.suppress(ValueError):
        document = json.loads(message)
        return isinstance(document, dict) and document.get("type") == "auth"
    return False


async def _replay(api: str, fixture: Fixture, hosts: int, per_host: int, tally: Tally) -> None:
    shards = Shards(hosts * per_host, fixture.points_per_run)
    await asyncio.gather(*(replay_host(api, fixture, shards, per_host, tally) for _ in range(hosts)))


# --- setups and figures ----------------------------------------------------------------------------


@contextmanager
def one_sqlite(home: Path, settings: dict[str, str]) -> Iterator[Server]:
    with prefect_server(home, settings=settings) as server:
        yield server


@contextmanager
def one_postgres(home: Path, settings: dict[str, str]) -> Iterator[Server]:
    with postgres() as pg, prefect_server(home, database=pg, settings=settings) as server:
        yield server


Setup = Callable[[Path, dict[str, str]], AbstractContextManager[Server]]


def scaled_out(api_processes: int) -> Setup:
    @contextmanager
    def setup(home: Path, settings: dict[str, str]) -> Iterator[Server]:
        with postgres() as pg, redis() as broker, multi_server(home, pg, broker, api_processes, settings) as server:
            yield server

    return setup


SETUPS: dict[str, Setup] = {
    "sqlite": one_sqlite,
    "postgres": one_postgres,
    "scaled-out": scaled_out(2),
    "scaled-out-1": scaled_out(1),
}
SETUP_NAMES = {
    "sqlite": "one process, SQLite",
    "postgres": "one process, PostgreSQL",
    "scaled-out": "2 API + services + Redis, PostgreSQL",
    "scaled-out-1": "1 API + services + Redis, PostgreSQL",
}
TABLE_SETUPS = ["sqlite", "postgres", "scaled-out"]
# What the server processes run: the launcher's command (Prefect's command line with kernelsweep's fix,
# kernelsweep.flows.server_process), or Prefect's own, to measure the fix side by side.
COMMANDS = {"kernelsweep": launcher.SERVER_PROCESS, "prefect": "prefect"}


@contextmanager
def server_command(name: str) -> Iterator[None]:
    """Servers the launcher starts meanwhile run COMMANDS[name]."""
    kept, launcher.SERVER_PROCESS = launcher.SERVER_PROCESS, COMMANDS[name]
    try:
        yield
    finally:
        launcher.SERVER_PROCESS = kept


@dataclass(frozen=True)
class Figure:
    setup: str
    command: str
    hosts: int
    points: int
    wall: float
    cpu_ms: dict[str, float]  # per point, by process
    generator_ms: float
    latency_ms: tuple[float, float, float]
    calls: int
    retries: int
    errors: dict[str, int]
    recorded: tuple[int, int]  # task runs the server recorded, of those whose events were sent
    redis_calls: float | None  # commands Redis served per point; None for a setup without Redis
    load: str

    @property
    def server_ms(self) -> float:
        return sum(self.cpu_ms.values())

    def line(self) -> str:
        parts = ", ".join(f"{name} {ms:.0f}" for name, ms in self.cpu_ms.items())
        p50, p95, p99 = self.latency_ms
        errors = sum(self.errors.values())
        per_core = 1000.0 / self.server_ms if self.server_ms > 0 else float("inf")
        redis = "" if self.redis_calls is None else f"Redis {self.redis_calls:.0f} calls / point; "
        return (f"  {SETUP_NAMES[self.setup]:<38} ({self.command:<11}) {self.hosts:>3} hosts' worth, "
                f"{self.points} points in {self.wall:5.1f} s: "
                f"server {self.server_ms:4.0f} ms CPU / point ({parts}) = {per_core:5.1f} points/s per server core; "
                f"API p50/p95/p99 {p50:.0f}/{p95:.0f}/{p99:.0f} ms over {self.calls} calls; {self.retries} refused and "
                f"retried, {errors} errors; {self.recorded[0]} of {self.recorded[1]} task runs recorded; "
                f"{redis}load generator {self.generator_ms:.0f} ms / point; {self.load}")  # fmt: skip


def measure(server: Server, fixture: Fixture, setup: str, command: str, hosts: int, per_host: int) -> Figure:
    idle = idle_rates(server)
    tally, task_runs = Tally(), server.task_runs()
    before, started, own = server.cpu_parts(), time.perf_counter(), _own_cpu()
    commands = server.redis_commands()
    asyncio.run(_replay(server.api_url, fixture, hosts, per_host, tally))
    wall = time.perf_counter() - started
    generator = _own_cpu() - own
    seen_load = load()
    settle_server(server)  # the services work off the events the API queued
    spent = time.perf_counter() - started
    after = server.cpu_parts()
    recorded = (server.task_runs() - task_runs, len(tally.task_runs))
    points = max(tally.points, 1)
    redis_calls = None if commands is None else (server.redis_commands() - commands) / points
    cpu_ms = {name: max(0.0, after[name] - before[name] - idle[name] * spent) / points * 1000 for name in after}
    quantiles = statistics.quantiles(tally.latencies, n=100) if len(tally.latencies) > 1 else [0.0] * 99
    latency = (quantiles[49] * 1000, quantiles[94] * 1000, quantiles[98] * 1000)
    return Figure(setup, command, hosts, tally.points, wall, cpu_ms, generator / points * 1000, latency,
                  len(tally.latencies), tally.retries, tally.errors, recorded, redis_calls, seen_load)  # fmt: skip


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(
    base: Path, setups: list[str], commands: list[str], host_counts: list[int], points: int, settings: dict[str, str]
) -> list[Figure]:
    fixture = load_fixture(FIXTURE.read_text())
    run_calls = fixture.run_open + fixture.run_close
    print(f"Replaying {FIXTURE.name}: a point is {_calls(fixture.point)}, and 1/{fixture.points_per_run} of its flow "
          f"run's {_calls(run_calls)}; at least {points} points per run ({load()})")  # fmt: skip
    figures = []
    for index, (setup, command) in enumerate((s, c) for s in setups for c in commands):
        with server_command(command), SETUPS[setup](base / f"{setup}-{index}", settings) as server:
            asyncio.run(_replay(server.api_url, fixture, 1, 2, Tally()))  # warm-up: the flow registers
            for hosts in host_counts:
                figure = measure(server, fixture, setup, command, hosts, max(1, -(-points // hosts)))
                figures.append(figure)
                print(figure.line(), flush=True)
                for what, count in sorted(figure.errors.items(), key=lambda kv: -kv[1])[:5]:
                    print(f"      {count} x {what}")
    return figures


def _calls(steps: list[Step]) -> str:
    http = sum(s.kind == "http" for s in steps)
    return f"{http} HTTP calls and {len(steps) - http} websocket messages"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["record", "run"])
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=TABLE_SETUPS)
    parser.add_argument("--hosts", type=int, nargs="+", default=[10, 50, 100, 200], help="points in flight at once")
    parser.add_argument("--points", type=int, default=100, help="points per run, at least one per host")
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=["kernelsweep"],
                        help="what the server processes run, each in turn for every setup: the launcher's "
                        "(Prefect's command line with kernelsweep's fix), or Prefect's own")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a server setting on top of kernelsweep's, e.g. to compare one")  # fmt: skip
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.set)
    with tempfile.TemporaryDirectory(prefix="kernelsweep-replay-") as folder:
        if args.action == "record":
            fixture = record(Path(folder))
            FIXTURE.write_text(dump(fixture, RECORD_COMMAND) + "\n")
            print(f"{FIXTURE}: a point is {_calls(fixture.point)} of a shard of {fixture.points_per_run}")
        else:
            run(Path(folder), args.setups, args.commands, args.hosts, args.points, settings)


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    main()
