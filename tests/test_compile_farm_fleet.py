"""The compile farm end to end, with real parts only: the session's fleet server (`kernelsweep fleet up`
from the repository's prefect.yaml, which deploys `compile-shard/compile`), two simulated compile
hosts without a Neuron device in `kernelsweep-compile`, one simulated host per family, a fleet run
started with `prefect deployment run`, and the dataset read back.

The first compile host dies (its whole process tree killed) after compiling part of a shard; the
server's shard retries hand that shard to the second compile host, which compiles only what the store
lacks. Every NEFF is then a compile host's (the rows' `neff_compile_host`, and the simulator's record
of what each host compiled), the Neuron hosts compile nothing, every point lands exactly once, and
capture shards start while the farm is still compiling. The spec also searches one trn2 shape (budget
4, two batches): each batch of trials is compiled by a compile run of the farm before the trn2 host
captures it, so its trials' NEFFs and its winner's contest are the farm's too. The contest, a sweep run
inside the fleet run, gets no report of its own: the fleet run's report, read here, covers it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prefect_server import PrefectServer, Worker, poll, sim_host_env
from specs import sim_spec

from kernelsweep.results import reader
from kernelsweep.sim.latency import COMPILE, read_latencies
from kernelsweep.sweepspec.expansion import expand

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet-ops")]  # beside test_fleet.py, on another server

RUN_TIMEOUT = 900
FAMILIES = ("trn1", "trn2", "inf2")
COMPILE_POOL = "kernelsweep-compile"
FARM_HOST = {"KERNELSWEEP_SIM_CORES": "0", "KERNELSWEEP_SIM_TIME_SCALE": "1"}  # no device; 2.5 s per compile


def _start(server: PrefectServer, root: Path, name: str, pool: str, env: dict[str, str]) -> Worker:
    worker = server.start_worker(name, pool, env=env)
    server.wait_online(name, pool)
    return worker


def _farm_env(root: Path) -> dict[str, str]:
    return {"KERNELSWEEP_LOCK_DIR": str(root / "locks"), "KERNELSWEEP_SIM_STATE": str(root / "sim"), **FARM_HOST}


def _runs(server: PrefectServer, fleet_run: str, flow: str) -> list[dict]:
    flows = {f["id"]: f["name"] for f in server.api("/flows/filter", {})}
    children = server.flow_runs(parent_flow_run_id={"any_": [fleet_run]})
    return [r for r in children if flows.get(r["flow_id"]) == flow]


def _running(server: PrefectServer, fleet_run: str) -> str | None:
    return next((r["id"] for r in _runs(server, fleet_run, "compile-shard") if r["state"]["type"] == "RUNNING"), None)


def _trace_entries(artifacts: Path) -> int:
    return len(list(artifacts.glob("**/cache-v1/trace/**/*.json")))


def test_the_farm_compiles_every_neff_and_the_neuron_hosts_only_capture(fleet_server, control, tmp_path):
    server, root = fleet_server, tmp_path
    doomed = _start(server, root / "compile-a", "compile-a", COMPILE_POOL, _farm_env(root / "compile-a"))
    workers = [doomed]
    try:
        for family in FAMILIES:
            env = sim_host_env(root / f"{family}-a", family)
            workers.append(_start(server, root, f"{family}-a", f"kernelsweep-{family}", env))
        kernel = {"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": [2048, 4096], "free_size": [1, 16]}}
        matmul = {"kernel": "matmul", "dtypes": ["bfloat16"], "grid": {"M": [512], "K": [256], "N": [1024]}}
        searched = {**matmul, "lnc": [2], "search": {"budget": 4, "batch": 2, "warm_start": 0}}  # trn2 only: 2 batches
        execution = {"max_points_per_flow_run": 4, "compile_slots": 1}  # a shard per family; one compile at a time
        spec = sim_spec(root, [kernel, searched], name="farm", platforms=FAMILIES, execution=execution)
        points = expand(spec)
        parameter = f"spec={json.dumps(spec.model_dump(mode='json'))}"
        server.reports(enabled=True)  # the report's cost table is checked below
        done = server.run("prefect", "deployment", "run", "fleet/fleet", "-p", parameter)
        assert done.returncode == 0, done.stderr
        fleet_run = re.search(r"UUID:\s*([0-9a-f-]{36})", done.stdout).group(1)

        running = poll(lambda: _running(server, fleet_run), timeout=RUN_TIMEOUT, what="a compiling shard", every=0.2)
        poll(lambda: _trace_entries(Path(spec.artifacts)) >= 1 or None, timeout=RUN_TIMEOUT, what="a NEFF", every=0.2)
        doomed.die()
        assert _trace_entries(Path(spec.artifacts)) < 2, "the compile host must die mid-shard"
        crashed = {"type": "CRASHED", "name": "Crashed", "message": "its host was killed (set by the test)"}
        server.api(f"/flow_runs/{running}/set_state", {"state": crashed, "force": True})
        survivor = _start(server, root / "compile-b", "compile-b", COMPILE_POOL, _farm_env(root / "compile-b"))
        workers.append(survivor)

        outcome = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
        assert outcome["type"] == "COMPLETED", outcome["message"]
        status = server.run("kernelsweep", "fleet", "status", env={"COLUMNS": "250"})
        report = server.triggered_report(fleet_run, RUN_TIMEOUT)
        server.reports(enabled=False)
        assert server.wait_final(report["id"], RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
    finally:
        server.reports(enabled=False)
        for worker in workers:
            worker.stop()

    compiles, captures = _runs(server, fleet_run, "compile-shard"), _runs(server, fleet_run, "sweep-shard")
    contests = _runs(server, fleet_run, "sweep")  # the search winner's, ordinary sweep runs inside the fleet run
    assert contests and {r["state"]["type"] for r in contests} == {"COMPLETED"}
    for contest in contests:  # a step of the fleet run: its report starts, and stops at once with nothing made
        after = server.triggered_report(contest["id"], RUN_TIMEOUT)
        assert server.wait_final(after["id"], RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
        assert not server.api("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [after["id"]]}}})
    searching = [r for r in captures if "search" in r["tags"]]
    batches = [c for r in searching for c in _runs(server, r["id"], "compile-shard")]  # each search shard's own
    assert len(compiles) == 3 and len(captures) == 4 and len(searching) == 1 and len(batches) == 2
    assert {r["state"]["type"] for r in compiles + captures + batches} == {"COMPLETED"}
    [retried] = [r for r in compiles if r["id"] == running]
    assert retried["run_count"] == 2 and running in survivor.submitted()  # recovered like any shard

    rows = reader.read(spec.results).to_pylist()  # the grid's, the search trials' and their winners' contests
    grid = [r for r in rows if r["kernel"] == "vector_add"]
    keys = sorted((r["kernel"], r["shape"], r["platform"]) for r in grid)
    assert keys == sorted((p.kernel, p.shape, p.platform) for p in points) and len({r["row_id"] for r in grid}) == 12
    assert {r["status"] for r in rows} == {"ok"}
    assert all(r["trace_cache_hit"] and r["compile_cache_hit"] and r["compile_seconds"] is None for r in rows)
    assert {r["neff_compile_host"] for r in grid} == {"compile-a", "compile-b"}  # lineage: every NEFF the farm's
    trials = [r for r in rows if r["search_trial"] is not None and r["sweep"] == "farm"]
    assert len(trials) == 4 and {(r["platform"], r["host"]) for r in trials} == {("trn2", "trn2-a")}
    assert {r["neff_compile_host"] for r in trials} <= {"compile-a", "compile-b"}  # the search's too, trial by trial

    for family in FAMILIES:  # what the simulator was told to compile, host by host
        assert not [x for x in read_latencies(root / f"{family}-a" / "sim") if x.tool == COMPILE], family
    farm = [x for host in ("compile-a", "compile-b") for x in read_latencies(root / host / "sim") if x.tool == COMPILE]
    assert len({x.point for x in farm}) == 12 + 1  # the grid's points and the searched shape (its trials by shape)

    assert status.returncode == 0, status.stderr
    assert "compile: 3 of 3 shards completed on compile-b" in status.stdout, status.stdout  # its last attempt's host
    assert re.search(r"kernelsweep-compile\s.*compile-b", status.stdout), status.stdout
    assert "trn2: 2 of 2 shards completed on trn2-a" in status.stdout, status.stdout  # the grid's, the search's

    first_capture = min(r["start_time"] for r in captures)
    last_compile = max(r["end_time"] for r in compiles)
    assert first_capture < last_compile, "capture shards start while the farm still compiles (streaming)"
    for key, run_id in (("fleet-farm", fleet_run), ("report-cost", report["id"])):  # the summary, and the report
        criteria = {"key": {"any_": [key]}, "flow_run_id": {"any_": [run_id]}}
        [found] = server.api("/artifacts/filter", {"artifacts": criteria})
        assert key != "fleet-farm" or "4 of 4 shards completed" in found["data"], found  # with the search shard
        hours = dict(
            re.findall(r"\| (Neuron-host-hours|CPU-host-hours \(compile farm\)) \| ([0-9.]+) \|", found["data"])
        )
        assert float(hours["Neuron-host-hours"]) > 0 and float(hours["CPU-host-hours (compile farm)"]) > 0, found
