"""The fleet end to end, with real parts only: `prefect server start`, `kernelsweep fleet up`, workers
as separate processes (simulated trn1 and trn2 hosts, each with its own lock and state folders), the
fleet deployment started with `prefect deployment run`, and the dataset read back.

Every test here shares the session's fleet server and the module's control worker (the fleet runs
and the reports they trigger run on it). Two waits overlap the other tests instead of adding to them:
the spread run is a module fixture and the report its completion triggers is checked by the module's
last test; and the silent host, whose shard Prefect marks Crashed only 30-60 s after the host dies,
dies before the spread run starts and is checked at the end too.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from prefect_server import CRASH_AFTER_SECONDS, PrefectServer, Worker, poll, sim_host_env
from specs import sim_spec

from kernelsweep.expansion import expand
from kernelsweep.results import reader
from kernelsweep.spec import Point, SweepSpec

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet")]

POOLS = {family: f"kernelsweep-{family}" for family in ("trn1", "trn2", "inf2")}
RUN_TIMEOUT = 600
SLOW_HOST = {"KERNELSWEEP_SIM_TIME_SCALE": "3"}  # a shard lasts long enough to be caught running


def _spec(tmp_path: Path, name: str, platforms: tuple[str, ...], sizes: list[int], per_run: int) -> SweepSpec:
    """`name` is the fleet summary's artifact key (`fleet-NAME`): one per test, as runs overlap here."""
    kernel = {"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": sizes, "free_size": [1, 16]}}
    return sim_spec(tmp_path, [kernel], name=name, platforms=platforms, execution={"max_points_per_flow_run": per_run})


def _hosts(server: PrefectServer, root: Path, hosts: dict[str, str], **env: str) -> list[Worker]:
    """One worker per simulated host (name -> family), all online."""
    workers = [
        server.start_worker(name, POOLS[family], env=sim_host_env(root / name, family, **env))
        for name, family in hosts.items()
    ]
    _online(server, workers)
    return workers


def _online(server: PrefectServer, workers: list[Worker]) -> None:
    for worker in workers:
        poll(lambda w=worker: w.name in server.workers_online(w.pool), timeout=120, what=f"worker {worker.name}")


def _run_fleet(server: PrefectServer, spec: SweepSpec) -> str:
    done = server.run(
        "prefect", "deployment", "run", "fleet/fleet", "-p", f"spec={json.dumps(spec.model_dump(mode='json'))}"
    )
    assert done.returncode == 0, done.stderr
    return re.search(r"UUID:\s*([0-9a-f-]{36})", done.stdout).group(1)


def _shards(server: PrefectServer, fleet_run_id: str) -> dict[str, dict]:
    """The fleet run's shard flow runs, by id."""
    return {run["id"]: run for run in server.flow_runs(parent_flow_run_id={"any_": [fleet_run_id]})}


def _running_shard(server: PrefectServer, fleet_run_id: str) -> str:
    return poll(
        lambda: next((i for i, r in _shards(server, fleet_run_id).items() if r["state"]["type"] == "RUNNING"), None),
        timeout=RUN_TIMEOUT,
        what="a running shard",
        every=0.5,
    )


def _dataset_rows(spec: SweepSpec) -> list[dict]:
    return reader.read(
        spec.results, columns=["row_id", "kernel", "shape", "dtype", "platform", "flow_run_id", "status"]
    ).to_pylist()


def _writers(spec: SweepSpec) -> set[str]:
    """The flow runs with rows in the dataset (none when nothing made its folder)."""
    return {r["flow_run_id"] for r in _dataset_rows(spec)} if Path(spec.results).is_dir() else set()


def _keys(points_or_rows) -> list[tuple]:
    get = (
        (lambda x: (x["kernel"], x["shape"], x["dtype"], x["platform"]))
        if points_or_rows and isinstance(points_or_rows[0], dict)
        else (lambda p: (p.kernel, p.shape, p.dtype, p.platform))
    )
    return sorted(get(x) for x in points_or_rows)


@pytest.fixture(scope="module")
def control(fleet_server) -> Worker:
    """The control pool's worker: the fleet runs of every test here, and the reports they trigger."""
    worker = fleet_server.start_worker("control", "kernelsweep-control", limit=4)
    try:
        _online(fleet_server, [worker])
        yield worker
    finally:
        worker.stop()


@dataclass
class SilentShard:
    fleet_run: str
    shard: str  # the shard flow run that was running on the host when it died
    took: set[str]  # the flow runs the host took
    spec: SweepSpec


@pytest.fixture(scope="module")
def silent_shard(fleet_server, control, tmp_path_factory) -> SilentShard:
    """An inf2 host that dies while it runs the only shard of its fleet run, and says nothing more."""
    server, root = fleet_server, tmp_path_factory.mktemp("silent")
    [host] = _hosts(server, root, {"inf2-silent": "inf2"}, **SLOW_HOST)
    try:
        spec = _spec(root, "silent", ("inf2",), [2048], per_run=2)  # 2 points: 1 shard
        fleet_run = _run_fleet(server, spec)
        running = _running_shard(server, fleet_run)
    finally:
        host.die()
    return SilentShard(fleet_run, running, host.submitted(), spec)


@dataclass
class SpreadRun:
    id: str
    spec: SweepSpec
    points: list[Point]
    state: dict  # the fleet run's final state
    shards: dict[str, dict]
    took: dict[str, set[str]]  # host -> the shard flow runs it took
    status: subprocess.CompletedProcess  # `kernelsweep fleet status` while the hosts were online


@pytest.fixture(scope="module")
def spread(fleet_server, control, silent_shard, tmp_path_factory) -> SpreadRun:
    """One fleet run over two trn2 hosts and one trn1 host, to its end; the hosts stop afterwards (their
    shards are not for the later tests' hosts). It starts after the silent host died (`silent_shard`),
    so that Prefect's wait for the silent host's heartbeat passes while it runs."""
    server, root = fleet_server, tmp_path_factory.mktemp("spread")
    hosts = _hosts(server, root, {"trn2-a": "trn2", "trn2-b": "trn2", "trn1-a": "trn1"})
    try:
        spec = _spec(
            root, "spread", ("trn1", "trn2"), [2048, 4096, 8192], per_run=2
        )  # 6 points per family: 3 shards each
        fleet_run = _run_fleet(server, spec)
        state = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
        status = server.run("kernelsweep", "fleet", "status")
    finally:
        for host in hosts:
            host.stop()
    took = {w.name: w.submitted() for w in hosts}
    return SpreadRun(fleet_run, spec, expand(spec), state, _shards(server, fleet_run), took, status)


def test_a_fleet_run_spreads_each_family_over_its_own_workers(fleet_server, spread):
    server, shards, took = fleet_server, spread.shards, spread.took
    assert spread.state["type"] == "COMPLETED"
    by_family = {f: {i for i, r in shards.items() if f in r["tags"]} for f in ("trn1", "trn2")}
    assert len(shards) == 6 and {r["state"]["type"] for r in shards.values()} == {"COMPLETED"}
    assert len(by_family["trn1"]) == len(by_family["trn2"]) == 3
    assert took["trn2-a"] and took["trn2-b"], took  # both trn2 hosts shared the trn2 shards
    assert took["trn2-a"] | took["trn2-b"] == by_family["trn2"]
    assert took["trn1-a"] == by_family["trn1"]  # trn1 points ran only on the trn1 host
    rows = _dataset_rows(spread.spec)
    assert _keys(rows) == _keys(spread.points)  # every point exactly once
    assert len({r["row_id"] for r in rows}) == len(spread.points) and {r["status"] for r in rows} == {"ok"}
    assert {r["flow_run_id"] for r in rows if r["platform"] == "trn1"} <= took["trn1-a"]

    criteria = {"key": {"any_": ["fleet-spread"]}, "flow_run_id": {"any_": [spread.id]}}
    [summary] = server.api("/artifacts/filter", {"artifacts": criteria})
    table = summary["data"]
    assert "6 of 6 shards completed" in table and all(i in table for i in shards)
    assert table.count(".parquet") == 6

    status = spread.status
    assert status.returncode == 0, status.stderr
    assert re.search(r"kernelsweep-trn2\s.*2 \(trn2-a, trn2-b\)", status.stdout)
    assert f"last fleet run: fleet-spread ({spread.id}) Completed" in status.stdout


def test_the_deployments_carry_nightly_schedules_and_the_server_has_planned_them(fleet_server):
    deployments = {
        d["name"]: d for d in fleet_server.api("/deployments/filter", {"deployments": {"tags": {"all_": ["sweep"]}}})
    }
    assert sorted(deployments) == ["inf2", "trn1", "trn2"]
    for deployment in deployments.values():
        [schedule] = deployment["schedules"]
        assert schedule["schedule"]["cron"] == "0 2 * * *" and schedule["schedule"]["timezone"] == "UTC"
        assert deployment["work_pool_name"] == POOLS[deployment["name"]]
        assert deployment["parameters"]["spec"]["name"] == "nightly-test"  # the nightly spec `fleet up` stored
        planned = fleet_server.flow_runs(
            deployment_id={"any_": [deployment["id"]]}, state={"type": {"any_": ["SCHEDULED"]}}
        )
        assert planned and all(run["expected_start_time"].endswith("T02:00:00Z") for run in planned)


def test_a_worker_killed_mid_shard_loses_and_duplicates_nothing(fleet_server, control, tmp_path):
    """The host of a running shard dies and its shard is marked Crashed (here at once, through the API;
    the module's last test shows the automation doing it after the host's silence); the fleet run says
    which shard to re-run; `prefect flow-run retry` re-runs it on the other host, into the same rows."""
    server = fleet_server
    [host] = _hosts(server, tmp_path, {"trn2-doomed": "trn2"}, **SLOW_HOST)  # alone, so it takes the first shard
    workers = [host]
    try:
        spec = _spec(tmp_path, "killed", ("trn2",), [2048, 4096], per_run=2)  # 4 points: 2 shards
        points = expand(spec)
        fleet_run = _run_fleet(server, spec)
        running = _running_shard(server, fleet_run)
        assert running in host.submitted()
        host.die()
        workers += _hosts(server, tmp_path, {"trn2-survivor": "trn2"})
        crashed = {"type": "CRASHED", "name": "Crashed", "message": "its host was killed (set by the test)"}
        server.api(f"/flow_runs/{running}/set_state", {"state": crashed, "force": True})
        assert server.state_of(running) == "CRASHED"
        outcome = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
        assert outcome["type"] == "FAILED" and f"prefect flow-run retry {running}" in outcome["message"]
        assert running not in _writers(spec)  # the crashed shard wrote nothing

        retry = server.run("prefect", "flow-run", "retry", running)
        assert retry.returncode == 0, retry.stdout + retry.stderr
        assert server.wait_final(running, RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
        assert running in workers[1].submitted()
        rows = _dataset_rows(spec)
        assert _keys(rows) == _keys(points) and len({r["row_id"] for r in rows}) == len(points)
        assert sum(r["flow_run_id"] == running for r in rows) == 2  # the re-run kept its flow run id
    finally:
        for worker in workers:
            worker.stop()


def test_a_family_with_no_worker_online_fails_its_shards_after_the_wait(fleet_server, control, tmp_path):
    server = fleet_server  # no live inf2 host anywhere (the silent one died before the spread run)
    spec = _spec(tmp_path, "no-worker", ("inf2",), [2048], per_run=2)
    spec = spec.model_copy(update={"execution": spec.execution.model_copy(update={"worker_wait_seconds": 5})})
    fleet_run = _run_fleet(server, spec)
    outcome = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
    assert outcome["type"] == "FAILED" and "1 of 1 shards did not complete" in outcome["message"]
    [shard] = _shards(server, fleet_run).values()
    assert shard["state"]["type"] == "CANCELLED"  # it will not start later, when a host appears
    assert shard["state"]["message"].startswith("no inf2 worker online in work pool kernelsweep-inf2 for 5 s")


def test_the_fleet_runs_completion_triggers_the_report_on_what_it_wrote(fleet_server, control, spread):
    """Last in the module: the report the spread run's completion triggers ran on the control worker
    while the tests above did."""
    server = fleet_server
    report_run = poll(
        lambda: next(
            (r for r in server.flow_runs() if r["parameters"].get("after_flow_run") == f"prefect.flow-run.{spread.id}"),
            None,
        ),
        timeout=RUN_TIMEOUT,
        what="the report the fleet run triggers",
    )
    assert server.wait_final(report_run["id"], RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
    page = Path(spread.spec.results) / "reports" / report_run["id"] / "index.html"
    assert page.is_file() and "vector_add" in page.read_text()


def test_a_silent_host_gets_its_shard_marked_crashed_by_the_automation(fleet_server, silent_shard):
    """Last in the module too: `fleet up` installs an automation that marks a running flow run Crashed
    after CRASH_AFTER_SECONDS without a heartbeat; the fleet run then says which shard to re-run."""
    server, running = fleet_server, silent_shard.shard
    assert running in silent_shard.took  # the host died running it
    # Its last heartbeat came at most HEARTBEAT_SECONDS before it died: Crashed within CRASH_AFTER_SECONDS of that.
    crashed = server.wait_final(running, CRASH_AFTER_SECONDS + 120)
    assert crashed["state"]["type"] == "CRASHED" and "no heartbeat" in crashed["state"]["message"]
    outcome = server.wait_final(silent_shard.fleet_run, RUN_TIMEOUT)["state"]
    assert outcome["type"] == "FAILED" and f"prefect flow-run retry {running}" in outcome["message"]
    assert running not in _writers(silent_shard.spec)  # the crashed shard wrote nothing
