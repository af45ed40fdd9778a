"""A real Prefect server and real workers, as separate processes, for deployment tests.

`PrefectServer` runs `prefect server start` on 127.0.0.1 with its own PREFECT_HOME and a free port,
started as kernelsweep starts every server (`kernelsweep.flows.server`); `start_worker` runs
`kernelsweep fleet worker` for one pool with its own environment (a simulated host: its platform,
cores, lock and state folders). Every process writes its log to a file next to its
state, so a failing test can be read afterwards while the test output stays clean. Waits poll with
deadlines; nothing sleeps and hopes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from kernelsweep.flows.server import (
    api_call,
    api_healthy,
    api_url,
    descendants,
    free_port,
    parent_of,
    serving,
    terminate_tree,
)
from kernelsweep.sim.config import sim_env

PYTHON_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")
REPORT_TRIGGER = "nightly__automation_1"  # what Prefect names the report deployment's trigger (prefect.yaml)


def bench_servers():
    """benchmarks/servers.py: the throwaway PostgreSQL the benchmarks measure on (one launcher for both)."""
    if "bench_servers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_servers", REPO / "benchmarks" / "servers.py")
        assert spec is not None and spec.loader is not None
        sys.modules["bench_servers"] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
        spec.loader.exec_module(sys.modules["bench_servers"])
    return sys.modules["bench_servers"]


def poll(check: Callable[[], T | None], *, timeout: float, what: str, every: float = 1.0) -> T:
    """`check()` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def alive(pid: int) -> bool:
    """Running, as opposed to gone or exited and waiting for its new parent (init) to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def recorded_task_run(task_run_id: str, api_url: str | None = None, timeout: float = 60) -> dict:
    """The task run (the API's JSON) from `api_url`, else the current Prefect API, once its server has
    recorded its final state. Prefect 3 writes a task run from the events its flow run emits, after the
    flow may have returned: a read straight after a sweep can find nothing yet (a 404 once failed CI this
    way), or a state and run count short of the last."""
    if api_url is None:
        from prefect.settings import PREFECT_API_URL

        api_url = PREFECT_API_URL.value()
    final = ("COMPLETED", "FAILED", "CANCELLED", "CRASHED")

    def read() -> dict | None:
        found = api_call(api_url, "/task_runs/filter", {"task_runs": {"id": {"any_": [task_run_id]}}})
        return next((run for run in found if (run["state"] or {}).get("type") in final), None)

    return poll(read, timeout=timeout, what=f"task run {task_run_id} recorded", every=0.2)


@dataclass
class PrefectServer:
    home: Path
    port: int
    env: dict[str, str]  # what a client process needs: PREFECT_API_URL, PREFECT_HOME, quiet logging
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def api_url(self) -> str:
        return api_url("127.0.0.1", self.port)

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def healthy(self) -> bool:
        return api_healthy(self.api_url)

    def api(self, path: str, body: dict | None = None, method: str | None = None) -> object:
        """The server's REST API: POST `body` (GET without one, or `method`); the decoded JSON answer, a
        busy server's 503 tried again as Prefect's client does (`api_call`)."""
        return api_call(self.api_url, path, body, method=method)

    def reports(self, *, enabled: bool) -> None:
        """The report deployment's trigger (a report after every completed sweep or fleet run) on or off:
        off where no assertion reads the report, so no test's run starts one that nothing checks."""
        [trigger] = [a for a in self.api("/automations/filter", {}) if a["name"] == REPORT_TRIGGER]  # type: ignore[union-attr, index]
        self.api(f"/automations/{trigger['id']}", {"enabled": enabled}, method="PATCH")

    def flow_runs(self, **criteria: object) -> list[dict]:
        """`/flow_runs/filter` with flow run criteria, e.g. `id={"any_": [...]}`."""
        return self.api("/flow_runs/filter", {"flow_runs": criteria, "limit": 200})  # type: ignore[return-value]

    def run_deployment(self, name: str, parameters: dict) -> str:
        """A flow run of deployment `flow/deployment` with `parameters`, made by the API call `prefect
        deployment run` makes (scheduled now, in the deployment's work queue); its id."""
        deployment = self.api(f"/deployments/name/{name}", method="GET")
        run = self.api(f"/deployments/{deployment['id']}/create_flow_run", {"parameters": parameters})  # type: ignore[index]
        return run["id"]  # type: ignore[index]

    def state_of(self, flow_run_id: str) -> str:
        return self.api(f"/flow_runs/{flow_run_id}")["state"]["type"]  # type: ignore[index]

    def wait_final(self, flow_run_id: str, timeout: float) -> dict:
        final = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
        return poll(
            lambda: (run := self.api(f"/flow_runs/{flow_run_id}"))["state"]["type"] in final and run,  # type: ignore[index]
            timeout=timeout,
            what=f"flow run {flow_run_id} to finish",
        )

    def triggered_report(self, flow_run_id: str, timeout: float) -> dict:
        """The report flow run the completion of `flow_run_id` started (the report deployment's trigger)."""
        after = f"prefect.flow-run.{flow_run_id}"
        reports = {"flows": {"name": {"any_": ["report"]}}, "limit": 200}  # the reports, not every run each second

        def started() -> dict | None:
            found: list[dict] = self.api("/flow_runs/filter", reports)  # type: ignore[assignment]
            return next((r for r in found if r["parameters"].get("after_flow_run") == after), None)

        return poll(
            started,
            timeout=timeout,
            what=f"the report {flow_run_id}'s completion triggers",
        )

    def workers_online(self, pool: str) -> list[str]:
        workers = self.api(f"/work_pools/{pool}/workers/filter", {})
        return sorted(w["name"] for w in workers if w["status"] == "ONLINE")  # type: ignore[union-attr, index]

    def wait_online(self, name: str, pool: str, timeout: float = 120) -> None:
        """Until the worker `name` is online in `pool` (its first heartbeat has reached the server)."""
        poll(lambda: name in self.workers_online(pool), timeout=timeout, what=f"worker {name} online in {pool}")

    def run(self, *argv: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """A CLI (`prefect ...`, `kernelsweep ...`) against this server."""
        return subprocess.run(
            [str(PYTHON_BIN / argv[0]), *argv[1:]],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.home,
        )

    def start_worker(self, name: str, pool: str, *, limit: int = 1, env: dict[str, str] | None = None) -> Worker:
        """A worker as every fleet host's unit starts one (`kernelsweep fleet worker`, which SIGTERM stops
        even when this suite was started with SIGINT ignored, as `nohup` and `cmd &` start it: a plain
        `prefect worker start` then ran on until its stop's 30 s grace ended), in its own session (so
        its whole process tree can be killed like a host dying)."""
        log = self.home / f"worker-{name}.log"
        handle = log.open("w")
        process = subprocess.Popen(
            [str(PYTHON_BIN / "kernelsweep"), "fleet", "worker", "--pool", pool, "--name", name, "--limit", str(limit)],
            env={**self.env, **(env or {})},
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=self.home,
            start_new_session=True,
        )
        handle.close()
        self.processes.append(process)
        return Worker(name, pool, process, log)


@dataclass
class Worker:
    name: str
    pool: str
    process: subprocess.Popen
    log: Path

    def submitted(self) -> set[str]:
        """Flow run ids this worker took (its log line `Worker 'NAME' submitting flow run 'ID'`)."""
        marker = f"Worker '{self.name}' submitting flow run '"
        return {
            line.split(marker, 1)[1].split("'", 1)[0] for line in self.log.read_text().splitlines() if marker in line
        }

    def flow_run_processes(self) -> list[str]:
        """The module each Python process below the worker runs (`-m prefect...`, `-m kernelsweep.flows...`):
        its flow runs' processes and its prefork server (the tools they start run other modules). A
        process the prefork server forked runs the server's module, and is named `forked`."""
        found = []
        below = descendants(self.process.pid)
        servers = set()
        for pid in below:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue  # ended meanwhile
            modules = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-m"]
            for module in modules:
                if module.startswith(("prefect", "kernelsweep.flows")):
                    found.append((pid, module))
                    servers |= {pid} if module.endswith(".prefork") else set()
        return sorted("forked" if parent_of(pid) in servers else module for pid, module in found)

    def die(self) -> None:
        """The host is gone at once (power loss, a terminated instance): the worker and every process
        it started are killed without a chance to say anything."""
        terminate_tree(self.process, grace_seconds=0)

    def stop(self) -> None:
        terminate_tree(self.process)


def quiet_env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_"))}
    env.update(
        {
            "PREFECT_HOME": str(home),
            "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
            "PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api",
            "PREFECT_UI_URL": f"http://127.0.0.1:{port}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            # Prefect's timers as short as they go, where a test waits on one:
            "PREFECT_WORKER_QUERY_SECONDS": "2",  # a worker looks for scheduled runs (default 10 s)
            "PREFECT_WORKER_HEARTBEAT_SECONDS": "5",
            "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_SECONDS),
            "PREFECT_SERVER_EVENTS_PROACTIVE_GRANULARITY": "PT1S",  # the crash automation looks for silence (5 s)
            # The scheduler's full pass once, at the start: a test's schedule is planned by the pass over
            # deployments changed in the last seconds (every 5 s), so a command that changes a schedule
            # and does not touch its deployment (as `fleet resume` once did) fails its test at once
            # rather than passing whenever the full pass (a minute) happens to come in time.
            "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "3600",
            "PYTHONPATH": str(Path(__file__).parent),  # test-only kernel definitions
        }
    )
    return env


@contextmanager
def prefect_server(
    home: Path, *, startup_timeout: float = 180, database_url: str | None = None
) -> Iterator[PrefectServer]:
    """`prefect server start` on 127.0.0.1 and a free port (on `database_url`, else SQLite in `home`);
    stops it and every worker it started."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = PrefectServer(home, port, quiet_env(home, port))
    database = {"PREFECT_API_DATABASE_CONNECTION_URL": database_url} if database_url else {}
    with serving(port, server.env | database, home / "server.log", cwd=home, start_timeout_seconds=startup_timeout):
        try:
            yield server
        finally:
            for child in server.processes:
                terminate_tree(child)  # flow runs live in sessions of their own: the whole tree


@contextmanager
def own_server(home: Path) -> Iterator[PrefectServer]:
    """A real server on a throwaway PostgreSQL cluster, both stopped afterwards."""
    with bench_servers().postgres() as database:
        with prefect_server(home, database_url=database.url) as server:
            yield server


@dataclass
class SharedServer:
    """One server for every process of a test run: started by the xdist controller in a thread (the test
    processes start meanwhile), its address written to a file once it answers, which each process's
    `attach` waits for."""

    address: Path  # holds "PORT HOME" once the server answers
    stack: ExitStack = field(default_factory=ExitStack)
    thread: threading.Thread | None = None

    @classmethod
    def start(cls) -> SharedServer:
        folder = Path(tempfile.mkdtemp(prefix="kernelsweep-stage-server-"))
        shared = cls(folder / "address")
        shared.stack.callback(shutil.rmtree, folder, ignore_errors=True)
        shared.thread = threading.Thread(target=shared._serve, args=(folder / "home",), daemon=True)
        shared.thread.start()
        return shared

    def _serve(self, home: Path) -> None:
        try:
            server = self.stack.enter_context(own_server(home))
        except BaseException as exc:  # the processes waiting for it read why
            self.address.write_text(f"failed {exc!r}")
            raise
        ready = self.address.with_suffix(".new")
        ready.write_text(f"{server.port} {server.home}")
        ready.rename(self.address)

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.join()
        self.stack.close()

    @staticmethod
    @contextmanager
    def attach(address: Path) -> Iterator[PrefectServer]:
        """The shared server, once it answers; the workers this process started on it are stopped afterwards."""
        text = poll(lambda: address.is_file() and address.read_text(), timeout=300, what="the stage's shared server")
        assert not text.startswith("failed"), text
        port, home = text.split(" ", 1)
        server = PrefectServer(Path(home), int(port), quiet_env(Path(home), int(port)))
        try:
            yield server
        finally:
            for child in server.processes:
                terminate_tree(child)


def sim_host_env(root: Path, platform: str, cores: int = 2, **extra: str) -> dict[str, str]:
    """A simulated Neuron host of one family, with its own lease and device-state folders."""
    return {
        **sim_env(platform=platform, cores=cores, state_dir=root / "sim"),
        "KERNELSWEEP_LOCK_DIR": str(root / "locks"),
        **extra,
    }


HEARTBEAT_SECONDS = 30  # a running flow run's heartbeat: PREFECT_FLOWS_HEARTBEAT_FREQUENCY's minimum (ge=30)
# A host silent this long is gone: its flow run is marked Crashed. The lowest `fleet up --crash-after` takes
# (two heartbeats), so a test that waits for it waits 30-60 s after the host dies.
CRASH_AFTER_SECONDS = 60

# The fleet servers' nightly hour: twelve hours from the session's start, which no session reaches. With
# the default (02:00 UTC) a stage that ran across 02:00 started the real nightly on its group's hosts: it
# took the fleet's one slot, and its shard ran on a test's host and hung as that host stopped.
NIGHTLY_HOUR = (datetime.now(UTC) + timedelta(hours=12)).hour
NIGHTLY_CRON = f"0 {NIGHTLY_HOUR} * * *"
NIGHTLY = """
name = "nightly-test"
platforms = ["trn2"]
toolchain = "sim"
results = "{root}/results"
artifacts = "{root}/artifacts"
[capture]
num_exec = 2
[fleet]
cron = "{cron}"
[[kernels]]
kernel = "vector_add"
dtypes = ["float32"]
grid = {{ n = [2048] }}
"""


def fleet_up(server: PrefectServer, repo: Path) -> None:
    """The fleet set up on `server` by `kernelsweep fleet up` from the repository's prefect.yaml, the
    nightly spec being a small simulated one with its folders under the server's home."""
    spec = server.home / "nightly.toml"
    spec.write_text(NIGHTLY.format(root=server.home / "nightly", cron=NIGHTLY_CRON))
    done = server.run(
        *("kernelsweep", "fleet", "up", "--file", str(repo / "deployments/prefect.yaml"), "--spec", str(spec)),
        *("--crash-after", str(CRASH_AFTER_SECONDS)),
    )
    assert done.returncode == 0, done.stderr
