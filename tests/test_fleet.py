"""The fleet end to end, with real parts only: `prefect server start`, `kernelsweep fleet up`, workers
as separate processes (simulated trn1 and trn2 hosts, each with its own lock and state folders), the
fleet deployment started with `prefect deployment run`, and the dataset read back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prefect_server import CRASH_AFTER_SECONDS, PrefectServer, Worker, poll, sim_host_env
from specs import sim_spec

from kernelsweep.expansion import expand
from kernelsweep.results import reader
from kernelsweep.spec import SweepSpec

pytestmark = pytest.mark.slow

POOLS = {family: f"kernelsweep-{family}" for family in ("trn1", "trn2", "inf2")}
RUN_TIMEOUT = 600


def _spec(tmp_path: Path, platforms: tuple[str, ...], sizes: list[int], per_run: int) -> SweepSpec:
    kernel = {"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": sizes, "free_size": [1, 16]}}
    return sim_spec(
        tmp_path, [kernel], name="fleet-e2e", platforms=platforms, execution={"max_points_per_flow_run": per_run}
    )


def _start(server: PrefectServer, tmp_path: Path, hosts: dict[str, str], **env: str) -> list[Worker]:
    """A control worker plus one worker per simulated host (name -> family), all online."""
    workers = [server.start_worker(f"control-{tmp_path.name}", "kernelsweep-control", limit=2)]
    for name, family in hosts.items():
        workers.append(server.start_worker(name, POOLS[family], env=sim_host_env(tmp_path / name, family, **env)))
    for worker in workers:
        poll(lambda w=worker: w.name in server.workers_online(w.pool), timeout=120, what=f"worker {worker.name}")
    return workers


def _run_fleet(server: PrefectServer, spec: SweepSpec) -> str:
    done = server.run(
        "prefect", "deployment", "run", "fleet/fleet", "-p", f"spec={json.dumps(spec.model_dump(mode='json'))}"
    )
    assert done.returncode == 0, done.stderr
    return re.search(r"UUID:\s*([0-9a-f-]{36})", done.stdout).group(1)


def _shards(server: PrefectServer, fleet_run_id: str) -> dict[str, dict]:
    """The fleet run's shard flow runs, by id."""
    return {run["id"]: run for run in server.flow_runs(parent_flow_run_id={"any_": [fleet_run_id]})}


def _dataset_rows(spec: SweepSpec) -> list[dict]:
    return reader.read(
        spec.results, columns=["row_id", "kernel", "shape", "dtype", "platform", "flow_run_id", "status"]
    ).to_pylist()


def _keys(points_or_rows) -> list[tuple]:
    get = (
        (lambda x: (x["kernel"], x["shape"], x["dtype"], x["platform"]))
        if points_or_rows and isinstance(points_or_rows[0], dict)
        else (lambda p: (p.kernel, p.shape, p.dtype, p.platform))
    )
    return sorted(get(x) for x in points_or_rows)


def test_a_fleet_run_spreads_each_family_over_its_own_workers(fleet_server, tmp_path):
    server = fleet_server
    hosts = {"trn2-a": "trn2", "trn2-b": "trn2", "trn1-a": "trn1"}
    workers = _start(server, tmp_path, hosts)
    try:
        spec = _spec(tmp_path, ("trn1", "trn2"), [2048, 4096, 8192], per_run=2)  # 6 points per family: 3 shards each
        points = expand(spec)
        fleet_run = _run_fleet(server, spec)
        assert server.wait_final(fleet_run, RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
        shards = _shards(server, fleet_run)
        by_family = {f: {i for i, r in shards.items() if f in r["tags"]} for f in ("trn1", "trn2")}
        assert len(shards) == 6 and {r["state"]["type"] for r in shards.values()} == {"COMPLETED"}
        assert len(by_family["trn1"]) == len(by_family["trn2"]) == 3
        took = {w.name: w.submitted() for w in workers}
        assert took["trn2-a"] and took["trn2-b"], took  # both trn2 hosts shared the trn2 shards
        assert took["trn2-a"] | took["trn2-b"] == by_family["trn2"]
        assert took["trn1-a"] == by_family["trn1"]  # trn1 points ran only on the trn1 host
        rows = _dataset_rows(spec)
        assert _keys(rows) == _keys(points)  # every point exactly once
        assert len({r["row_id"] for r in rows}) == len(points) and {r["status"] for r in rows} == {"ok"}
        assert {r["flow_run_id"] for r in rows if r["platform"] == "trn1"} <= took["trn1-a"]

        summary = server.api("/artifacts/filter", {"artifacts": {"key": {"any_": ["fleet-fleet-e2e"]}}})
        table = summary[0]["data"]
        assert "6 of 6 shards completed" in table and all(i in table for i in shards)
        assert table.count(".parquet") == 6

        status = server.run("kernelsweep", "fleet", "status")
        assert status.returncode == 0, status.stderr
        assert re.search(r"kernelsweep-trn2\s.*2 \(trn2-a, trn2-b\)", status.stdout)
        assert f"last fleet run: fleet-fleet-e2e ({fleet_run}) Completed" in status.stdout

        # The fleet run's completion triggers the report deployment, on the results that run wrote.
        report_run = poll(
            lambda: next(
                (
                    r
                    for r in server.flow_runs()
                    if r["parameters"].get("after_flow_run") == f"prefect.flow-run.{fleet_run}"
                ),
                None,
            ),
            timeout=RUN_TIMEOUT,
            what="the report the fleet run triggers",
        )
        assert server.wait_final(report_run["id"], RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
        page = Path(spec.results) / "reports" / report_run["id"] / "index.html"
        assert page.is_file() and "vector_add" in page.read_text()
    finally:
        for worker in workers:
            worker.stop()


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


def test_a_worker_killed_mid_shard_loses_and_duplicates_nothing(fleet_server, tmp_path):
    """The host of a running shard dies; its silence gets the shard marked Crashed (the automation
    `fleet up` installs); the fleet run says which shard to re-run; `prefect flow-run retry` re-runs
    it on the other host, into the same rows."""
    server = fleet_server
    slow = {"KERNELSWEEP_SIM_TIME_SCALE": "3"}  # a shard lasts long enough to be caught running
    workers = _start(server, tmp_path, {"trn2-slow-a": "trn2", "trn2-slow-b": "trn2"}, **slow)
    try:
        spec = _spec(tmp_path, ("trn2",), [2048, 4096], per_run=2)  # 4 points: 2 shards
        points = expand(spec)
        fleet_run = _run_fleet(server, spec)
        running = poll(
            lambda: next((i for i, r in _shards(server, fleet_run).items() if r["state"]["type"] == "RUNNING"), None),
            timeout=RUN_TIMEOUT,
            what="a running shard",
        )
        host = next(w for w in workers[1:] if running in w.submitted())
        host.die()
        crashed = server.wait_final(running, CRASH_AFTER_SECONDS + 120)
        assert crashed["state"]["type"] == "CRASHED" and "no heartbeat" in crashed["state"]["message"]
        outcome = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
        assert outcome["type"] == "FAILED" and f"prefect flow-run retry {running}" in outcome["message"]
        assert running not in {r["flow_run_id"] for r in _dataset_rows(spec)}  # the crashed shard wrote nothing

        retry = server.run("prefect", "flow-run", "retry", running)
        assert retry.returncode == 0, retry.stdout + retry.stderr
        assert server.wait_final(running, RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
        survivor = next(w for w in workers[1:] if w is not host)
        assert running in survivor.submitted()
        rows = _dataset_rows(spec)
        assert _keys(rows) == _keys(points) and len({r["row_id"] for r in rows}) == len(points)
        assert sum(r["flow_run_id"] == running for r in rows) == 2  # the re-run kept its flow run id
    finally:
        for worker in workers:
            worker.stop()


def test_a_family_with_no_worker_online_fails_its_shards_after_the_wait(fleet_server, tmp_path):
    server = fleet_server
    workers = _start(server, tmp_path, {})  # the control worker only: no inf2 host anywhere
    try:
        spec = _spec(tmp_path, ("inf2",), [2048], per_run=2)
        spec = spec.model_copy(update={"execution": spec.execution.model_copy(update={"worker_wait_seconds": 5})})
        fleet_run = _run_fleet(server, spec)
        outcome = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
        assert outcome["type"] == "FAILED" and "1 of 1 shards did not complete" in outcome["message"]
        [shard] = _shards(server, fleet_run).values()
        assert shard["state"]["type"] == "CANCELLED"  # it will not start later, when a host appears
        assert shard["state"]["message"].startswith("no inf2 worker online in work pool kernelsweep-inf2 for 5 s")
    finally:
        for worker in workers:
            worker.stop()
