"""The fleet end to end, with real parts only: `prefect server start`, `kernelsweep fleet up`, workers
as separate processes (simulated trn1, trn2 and inf2 hosts, each with its own lock and state folders),
the fleet deployment started with `prefect deployment run`, and the dataset read back.

Every test here shares the session's fleet server and its control worker (both tests/conftest.py's:
the fleet runs and the reports they trigger run on that worker). Fleet runs go one at a time
(fleet/fleet's concurrency limit), so each test's run is short. Two waits overlap the other tests
instead of adding to them: the reports that completed fleet runs trigger (and the notifications they
send) are checked by the module's last tests; and the silent host, whose sweep Prefect marks Crashed
only 30-60 s after the host dies, dies before the spread run starts and is checked at the end too.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prefect_server import CRASH_AFTER_SECONDS, NIGHTLY_CRON, NIGHTLY_HOUR, PrefectServer, Worker, poll, sim_host_env
from specs import sim_spec
from webhook import install_notifications, webhook_block

from kernelsweep.results import reader
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet")]

REPO = Path(__file__).resolve().parents[1]
POOLS = {family: f"kernelsweep-{family}" for family in ("trn1", "trn2", "inf2")}
NOTIFY_BLOCK = "kernelsweep-test-hook"
RUN_TIMEOUT = 600
RECOVERY_SECONDS = 180  # from a host's death to its fleet run's completion (issue 35)
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
        server.wait_online(worker.name, worker.pool)


def _run_fleet(server: PrefectServer, spec: SweepSpec, deployment: str = "fleet/fleet", *, cli: bool = False) -> str:
    """A flow run of `deployment` with `spec`: by `prefect deployment run` where a test says (`cli`), as a
    user starts one, else by the same API call from this process (the command is an interpreter and
    about two CPU-seconds of imports each time)."""
    if not cli:
        return server.run_deployment(deployment, {"spec": spec.model_dump(mode="json")})
    done = server.run(
        "prefect", "deployment", "run", deployment, "-p", f"spec={json.dumps(spec.model_dump(mode='json'))}"
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
        spec.results, columns=["row_id", "kernel", "shape", "dtype", "platform", "flow_run_id", "status", "host"]
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
def webhook(fleet_server) -> Iterator[list[dict]]:
    """A local webhook behind the custom-webhook notification block that `fleet up --notify
    custom-webhook/NOTIFY_BLOCK` names; the list fills with what arrives."""
    with webhook_block(fleet_server, NOTIFY_BLOCK) as received:
        yield received


@pytest.fixture(scope="module")
def failures_told(fleet_server, webhook) -> list[dict]:
    """The failure and refusal automations `fleet up --notify custom-webhook/NOTIFY_BLOCK` installs, put
    there directly, from this process (a `fleet up` costs minutes; the nightly test's, later or earlier,
    finds them unchanged), for a test that runs alone with -k."""
    from kernelsweep.flows.fleet import automations

    install_notifications(
        fleet_server, NOTIFY_BLOCK, automations.failure_notifications, automations.refusal_notifications
    )
    return webhook


def _told(webhook: list[dict], subject: str, what: str) -> dict:
    """The message with `subject` at the webhook, once it arrives."""
    return poll(lambda: next((m for m in webhook if m.get("subject") == subject), None), timeout=120, what=what)


@dataclass
class SilentShard:
    fleet_run: str  # here the sweep itself
    shard: str  # the flow run that was running on the host when it died
    took: set[str]  # the flow runs the host took
    spec: SweepSpec


@pytest.fixture(scope="module")
def silent_shard(fleet_server, control, tmp_path_factory) -> SilentShard:
    """An inf2 host that dies while it runs a sweep (sweep/inf2: not a fleet run, which would hold the
    fleet's one slot while Prefect waits for the host's silence), and says nothing more."""
    server, root = fleet_server, tmp_path_factory.mktemp("silent")
    [host] = _hosts(server, root, {"inf2-silent": "inf2"}, **SLOW_HOST)
    try:
        spec = _spec(root, "silent", ("inf2",), [2048], per_run=2)
        sweep_run = _run_fleet(server, spec, "sweep/inf2")
        poll(lambda: server.state_of(sweep_run) == "RUNNING" or None, timeout=RUN_TIMEOUT, what="the sweep running")
    finally:
        host.die()
    return SilentShard(sweep_run, sweep_run, host.submitted(), spec)


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
        server.reports(enabled=True)  # the module's last tests read the report this run's completion starts
        fleet_run = _run_fleet(server, spec, cli=True)
        state = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
        server.triggered_report(fleet_run, RUN_TIMEOUT)
        status = server.run("kernelsweep", "fleet", "status", env={"COLUMNS": "250"})  # one table row a line
    finally:
        server.reports(enabled=False)
        for host in hosts:
            host.stop()
    took = {w.name: w.submitted() for w in hosts}
    return SpreadRun(fleet_run, spec, expand(spec), state, _shards(server, fleet_run), took, status)


def test_a_fleet_run_spreads_each_family_over_its_own_workers(fleet_server, spread):
    server, shards, took = fleet_server, spread.shards, spread.took
    assert spread.state["type"] == "COMPLETED"
    by_family = {f: {i for i, r in shards.items() if f in r["tags"]} for f in ("trn1", "trn2")}
    assert len(shards) == 6 and {r["state"]["type"] for r in shards.values()} == {"COMPLETED"}
    assert {r["work_queue_name"] for r in shards.values()} == {"urgent"}  # started by hand: ahead of the nightly
    assert len(by_family["trn1"]) == len(by_family["trn2"]) == 3
    assert took["trn2-a"] and took["trn2-b"], took  # both trn2 hosts shared the trn2 shards
    assert took["trn2-a"] | took["trn2-b"] == by_family["trn2"]
    assert took["trn1-a"] == by_family["trn1"]  # trn1 points ran only on the trn1 host
    rows = _dataset_rows(spread.spec)
    assert _keys(rows) == _keys(spread.points)  # every point exactly once
    assert len({r["row_id"] for r in rows}) == len(spread.points) and {r["status"] for r in rows} == {"ok"}
    assert {r["flow_run_id"] for r in rows if r["platform"] == "trn1"} <= took["trn1-a"]
    assert all(r["flow_run_id"] in took[r["host"]] for r in rows)  # each row names the host that ran it (issue 35)

    criteria = {"key": {"any_": ["fleet-spread"]}, "flow_run_id": {"any_": [spread.id]}}
    [summary] = server.api("/artifacts/filter", {"artifacts": criteria})
    table = summary["data"]
    assert "6 of 6 shards completed" in table and all(i in table for i in shards)
    assert table.count(".parquet") == 6

    status = spread.status
    assert status.returncode == 0, status.stderr
    assert re.search(r"kernelsweep-trn2\s.*2 \(trn2-a, trn2-b\)", status.stdout), status.stdout
    assert f"last fleet run: fleet-spread ({spread.id}) Completed" in status.stdout
    assert "trn1: 3 of 3 shards completed on trn1-a" in status.stdout
    assert "trn2: 3 of 3 shards completed on trn2-a, trn2-b" in status.stdout


def _schedules(server: PrefectServer) -> dict[str, list[dict]]:
    """`flow/deployment` -> its schedules, for every deployment of the fleet."""
    found = server.api("/deployments/filter", {"deployments": {"tags": {"all_": ["kernelsweep"]}}})
    flows = {f["id"]: f["name"] for f in server.api("/flows/filter", {})}
    return {f"{flows[d['flow_id']]}/{d['name']}": d["schedules"] for d in found}


def _fleet_up(server: PrefectServer, *extra: str) -> None:
    argv = ("--file", str(REPO / "deployments/prefect.yaml"), "--spec", str(server.home / "nightly.toml"))
    done = server.run("kernelsweep", "fleet", "up", *argv, "--crash-after", str(CRASH_AFTER_SECONDS), *extra)
    assert done.returncode == 0, done.stderr


def test_the_nightly_is_the_fleet_run_and_a_paused_schedule_stays_paused(fleet_server, webhook):
    """First in the module: its second `fleet up` also installs the notification automation the
    module's last test sees deliver."""
    server = fleet_server
    schedules = _schedules(server)
    [nightly] = schedules.pop("fleet/fleet")
    assert (
        nightly["schedule"]["cron"] == NIGHTLY_CRON and nightly["schedule"]["timezone"] == "UTC" and nightly["active"]
    )
    assert set(schedules) >= {"sweep/trn1", "sweep/trn2", "sweep/inf2"} and not any(schedules.values())
    [fleet] = server.api("/deployments/filter", {"deployments": {"name": {"any_": ["fleet"]}}})
    assert fleet["concurrency_limit"] == 1 or fleet["global_concurrency_limit"]["limit"] == 1
    queues = {q["name"]: q["priority"] for q in server.api("/work_pools/kernelsweep-trn2/queues/filter", {})}
    assert queues["urgent"] < queues["nightly"]  # runs from the UI before the nightly shards

    paused = server.run("kernelsweep", "fleet", "pause")
    assert paused.returncode == 0 and f"paused fleet/fleet {NIGHTLY_CRON} (UTC)" in paused.stderr, paused.stderr
    _fleet_up(server, "--notify", f"custom-webhook/{NOTIFY_BLOCK}")
    [again] = _schedules(server)["fleet/fleet"]
    assert again["id"] == nightly["id"] and not again["active"]  # `fleet up` kept the pause
    assert not server.flow_runs(deployment_id={"any_": [fleet["id"]]}, state={"type": {"any_": ["SCHEDULED"]}})
    resumed = server.run("kernelsweep", "fleet", "resume")
    assert resumed.returncode == 0 and "resumed fleet/fleet" in resumed.stderr, resumed.stderr
    assert _schedules(server)["fleet/fleet"][0]["active"]
    planned = poll(  # within seconds: `resume` touched the deployment (the servers' full pass is off)
        lambda: server.flow_runs(deployment_id={"any_": [fleet["id"]]}, state={"type": {"any_": ["SCHEDULED"]}}),
        timeout=60,
        what="the server planning the nightly fleet runs after the resume",
    )
    assert all(run["expected_start_time"].endswith(f"T{NIGHTLY_HOUR:02d}:00:00Z") for run in planned)


def _journaled(spec: SweepSpec) -> dict[str, dict]:
    """The rows the shards' journals hold (finished points), by row id. A shard that completes removes
    its journal, maybe between the listing and the read: what is gone by then is left out."""
    rows = []
    for entry in (Path(spec.results) / "_journal").rglob("points/*.json"):
        with contextlib.suppress(FileNotFoundError):
            rows.append(json.loads(entry.read_text())["row"])
    return {r["row_id"]: r for r in rows}


def _later(iso: str, seconds: float) -> str:
    """`iso` (UTC, as the API writes times) plus `seconds`, in the API's form, so the two compare as text."""
    moved = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC) + timedelta(seconds=seconds)
    return moved.strftime("%Y-%m-%dT%H:%M:%S")


def _journaled_captures(spec: SweepSpec) -> list[Path]:
    """The captures a shard's journal holds (captured points, extracted or not)."""
    return list((Path(spec.results) / "_journal").rglob("captures/*.json"))


def _unfinished_task_runs(server: PrefectServer, flow_run_id: str) -> list[str]:
    tasks = server.api("/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
    return [t["name"] for t in tasks if t["state"]["type"] in ("RUNNING", "PENDING")]


def _captures_since(server: PrefectServer, flow_run_id: str, since: str) -> int:
    """Capture task runs of the flow run that started at or after `since` (ISO time, UTC)."""
    runs = server.api(
        "/task_runs/filter",
        {"flow_runs": {"id": {"any_": [flow_run_id]}}, "task_runs": {"name": {"like_": "capture-"}}},
    )
    return sum(1 for r in runs if r["start_time"] and r["start_time"] >= since)


def test_a_host_killed_mid_shard_is_recovered_without_remeasuring(fleet_server, control, failures_told, tmp_path):
    """The host of a running shard dies after finishing some of its points. With no step by anyone, the
    crash automation marks its shard Crashed once its heartbeats stop, and the server retries the shard
    on the family's other host, which measures only the points
    the journal lacks and extracts those it holds a capture of; the fleet run completes with every point
    once, and no point is captured twice. The summary names the dead host and counts its attempt's hours
    as dead, and the crash reaches the webhook naming the dead host, though the retry has the run by then."""
    server = fleet_server
    [host] = _hosts(server, tmp_path, {"trn2-doomed": "trn2"}, **SLOW_HOST)  # alone, so it takes the shard
    workers = [host]
    try:
        spec = _spec(tmp_path, "killed", ("trn2",), [2048, 4096, 8192], per_run=6)  # 6 points: 1 shard
        points = expand(spec)
        fleet_run = _run_fleet(server, spec)
        running = _running_shard(server, fleet_run)
        poll(lambda: len(_journaled(spec)) >= 1 or None, timeout=RUN_TIMEOUT, what="a finished point", every=0.2)
        # The flow run: the pool's command and Prefect's engine forked from the host's prefork server (no
        # interpreter of its own, no workspace supervisor before it):
        processes = host.flow_run_processes()
        assert processes == ["forked", "kernelsweep.flows.fleet.engine", "kernelsweep.flows.fleet.prefork"], processes
        host.die()
        killed_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        finished, captured = _journaled(spec), _journaled_captures(spec)
        assert 1 <= len(finished) < len(points), "the host must die mid-shard"
        assert len(captured) >= len(finished)  # a row's capture was journaled before its extraction
        workers += _hosts(server, tmp_path, {"trn2-survivor": "trn2"})

        final = server.wait_final(fleet_run, RUN_TIMEOUT)  # nobody acts: the automations crash it and retry it
        outcome = final["state"]
        assert outcome["type"] == "COMPLETED", outcome["message"]
        assert final["end_time"] < _later(killed_at, RECOVERY_SECONDS), (killed_at, final["end_time"])
        assert running in workers[1].submitted() and server.flow_runs(id={"any_": [running]})[0]["run_count"] == 2
        rows = {r["row_id"]: r for r in _dataset_rows(spec)}
        assert _keys(list(rows.values())) == _keys(points) and len(rows) == len(points)  # every point once
        kept = reader.read(spec.results, columns=["row_id", "started_at", "ntff_sha256"]).to_pylist()
        for row in kept:
            if row["row_id"] in finished:  # the same measurement, not a new one
                assert row["ntff_sha256"] == finished[row["row_id"]]["ntff_sha256"]
        # only the points with no capture journaled are captured again: none twice
        assert _captures_since(server, running, killed_at) == len(points) - len(captured)
        # The dead attempt's task runs marked Crashed by the retry, and the retry's own final states recorded:
        # those come from its events, after the fleet run's state (its `store` once read still Running).
        poll(
            lambda: not _unfinished_task_runs(server, running),
            timeout=60,
            what="every task run of the shard ended (the dead attempt's marked Crashed)",
        )
        criteria = {"key": {"any_": ["fleet-killed"]}, "flow_run_id": {"any_": [fleet_run]}}
        [summary] = server.api("/artifacts/filter", {"artifacts": criteria})
        assert "1 of 1 shards completed" in summary["data"]
        # every host that touched the shard, and how the dead one's attempt ended
        assert "| trn2-doomed (crashed)<br>trn2-survivor |" in summary["data"]
        assert f"shard 0 (trn2): trn2-doomed (crashed: no heartbeat for {CRASH_AFTER_SECONDS} s" in summary["data"]
        dead = re.search(r"\| of which dead \(crashed [^|]*\| ([0-9.]+) \|", summary["data"])
        # the dead attempt ran at least CRASH_AFTER_SECONDS without a beat (hours printed to 0.001)
        assert dead and float(dead.group(1)) >= CRASH_AFTER_SECONDS / 3600 - 0.001, summary["data"]
        message = server.flow_runs(id={"any_": [fleet_run]})[0]["state"]["message"]
        assert "1 shards completed on a retry: shard 0 (trn2) after trn2-doomed (crashed" in message, message
        shard = server.flow_runs(id={"any_": [running]})[0]["name"]
        told = _told(failures_told, f"kernelsweep sweep-shard {shard} crashed", "the crash at the webhook")
        assert "on host trn2-doomed, attempt 1: Crashed: no heartbeat" in told["body"], told
    finally:
        for worker in workers:
            worker.stop()


def test_a_search_spreads_its_trials_over_the_family_and_resumes_after_a_host_dies(fleet_server, control, tmp_path):
    """A spec with a search (issue 36): its trials spread over both trn2 hosts through two search shards on
    one shared study; one host dies after finishing a trial, and its shard's retry, on the other host,
    asks again only what was left running: every configuration measured once, every finished trial a
    row once, not measured again. The winner is then confirmed into the tuned store."""
    from kernelsweep.tuned.store import TunedStore

    server = fleet_server
    kernel = {"kernel": "matmul", "dtypes": ["bfloat16"], "grid": {"M": [512], "K": [256], "N": [1024]},
              "search": {"budget": 6, "batch": 1, "warm_start": 0}}  # fmt: skip
    spec = sim_spec(tmp_path, [kernel], name="searched", platforms=("trn2",), execution={"max_points_per_flow_run": 3})
    # The doomed host is slow, to be caught between two trials, and alone until it dies: with the other
    # host up from the start, that host once used the whole budget while the doomed one measured its first
    # trial, and the doomed shard completed instead of dying with trials left to ask. The other host then
    # runs the second shard, the dead one's retry (the rest of the budget) and the winner's contest.
    workers = _hosts(server, tmp_path, {"trn2-doomed": "trn2"}, **SLOW_HOST)
    try:
        fleet_run = _run_fleet(server, spec)
        poll(
            lambda: any(r["host"] == "trn2-doomed" for r in _journaled(spec).values()) or None,
            timeout=RUN_TIMEOUT,
            what="a trial finished on the doomed host",
            every=0.2,
        )
        workers[0].die()
        finished = _journaled(spec)
        workers += _hosts(server, tmp_path, {"trn2-steady": "trn2"})
        outcome = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
        assert outcome["type"] == "COMPLETED", outcome["message"]
        shards = [r for r in _shards(server, fleet_run).values() if "search" in r["tags"]]  # and the contests
        assert len(shards) == 2 and sorted(r["run_count"] for r in shards) == [1, 2]  # the dead host's, retried
        columns = ["row_id", "host", "tunables", "search_trial", "status", "ntff_sha256"]
        rows = [r for r in reader.read(spec.results, columns=columns).to_pylist() if r["search_trial"] is not None]
        assert {r["host"] for r in rows} == {"trn2-doomed", "trn2-steady"}  # the trials spread over both
        assert len(rows) == 6 and len({r["row_id"] for r in rows}) == 6  # the budget, every trial a row once
        assert len({r["tunables"] for r in rows}) == 6  # no configuration measured twice
        for row in rows:
            if row["row_id"] in finished:  # the dead host's finished trials kept, not measured again
                assert row["ntff_sha256"] == finished[row["row_id"]]["ntff_sha256"]
        assert TunedStore(spec.results_location).entries()  # the winner, confirmed on a trn2 host
    finally:
        for worker in workers:
            worker.stop()


def test_guards_a_wrong_family_host_and_a_version_pin_fail_their_shards(fleet_server, control, failures_told, tmp_path):
    """A trn1 host started in the trn2 pool, and an inf2 host with a newer compiler than the run pins: each
    refuses its shard before measuring (retried, bounded, then final); the fleet run fails naming them,
    and each host's refusal reaches the webhook once, though it refused three times.
    Then a pin that no host of a family has, as the hosts last reported, fails the next fleet run at its
    start, before any shard."""
    server = fleet_server
    stray = server.start_worker("trn1-stray", POOLS["trn2"], env=sim_host_env(tmp_path / "stray", "trn1"))
    newer = sim_host_env(tmp_path / "old", "inf2", KERNELSWEEP_SIM_COMPILER_VERSION="2.22.1.0")
    old = server.start_worker("inf2-old", POOLS["inf2"], env=newer)
    try:
        _online(server, [stray, old])
        spec = _spec(tmp_path, "guards", ("trn2", "inf2"), [2048], per_run=2)
        spec = spec.model_copy(update={"require": spec.require.model_copy(update={"compiler": "2.21.*"})})
        fleet_run = _run_fleet(server, spec)
        outcome = server.wait_final(fleet_run, RUN_TIMEOUT)["state"]
    finally:
        stray.stop()
        old.stop()
    assert outcome["type"] == "FAILED" and "2 of 2 shards did not complete" in outcome["message"]
    assert "host trn1-stray is trn1" in outcome["message"] and "work pool kernelsweep-trn2" in outcome["message"]
    assert "host inf2-old in work pool kernelsweep-inf2 has compiler" in outcome["message"]
    assert "(the run requires 2.21.*)" in outcome["message"]
    shards = _shards(server, fleet_run).values()
    assert sorted(r["run_count"] for r in shards) == [3, 3]  # the first attempt and two automatic retries
    assert not _writers(spec)  # nothing measured
    [shard] = [r for r in shards if "inf2" in r["tags"]]
    assert shard["labels"]["kernelsweep.host"] == "inf2-old" and shard["labels"]["kernelsweep.compiler"]
    stray_told = "kernelsweep host trn1-stray refuses shards (wrong-pool)"
    assert "sits in work pool kernelsweep-trn2" in _told(failures_told, stray_told, "the stray's refusal")["body"]
    old_told = _told(failures_told, "kernelsweep host inf2-old refuses shards (versions)", "the old host's refusal")
    assert "(the run requires 2.21.*)" in old_told["body"], old_told
    assert [m["subject"] for m in failures_told].count(stray_told) == 1  # once a night, not once a refusal

    impossible = spec.model_copy(update={"require": spec.require.model_copy(update={"compiler": "9.99.*"})})
    refused = server.wait_final(_run_fleet(server, impossible), RUN_TIMEOUT)
    said = refused["state"]["message"]
    assert refused["state"]["type"] == "FAILED" and "nothing in the fleet can run guards: no " in said, said
    assert "(the run requires 9.99.*)" in said and "no shard was started" in said
    assert not _shards(server, refused["id"])


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
    report_run = server.triggered_report(spread.id, RUN_TIMEOUT)
    assert server.wait_final(report_run["id"], RUN_TIMEOUT)["state"]["type"] == "COMPLETED"
    page = Path(spread.spec.results) / "reports" / report_run["id"] / "index.html"
    assert page.is_file() and "vector_add" in page.read_text()


def test_a_silent_host_gets_its_shard_marked_crashed_by_the_automation(fleet_server, silent_shard):
    """Last in the module too: `fleet up` installs an automation that marks a running flow run Crashed
    after CRASH_AFTER_SECONDS without a heartbeat."""
    server, running = fleet_server, silent_shard.shard
    assert running in silent_shard.took  # the host died running it
    # Its last heartbeat came at most HEARTBEAT_SECONDS before it died: Crashed within CRASH_AFTER_SECONDS of that.
    crashed = server.wait_final(running, CRASH_AFTER_SECONDS + 120)
    assert crashed["state"]["type"] == "CRASHED" and "no heartbeat" in crashed["state"]["message"]
    assert running not in _writers(silent_shard.spec)  # the crashed sweep wrote nothing


def test_the_reports_notify_through_the_named_block(fleet_server, spread, webhook):
    """Last: the report each completed fleet run triggered emitted its night's event, and the automation
    `fleet up --notify` installed posted it to the local webhook through the named block."""
    summary = poll(
        lambda: next((m for m in webhook if m.get("subject", "").startswith("kernelsweep report:")), None),
        timeout=RUN_TIMEOUT,
        what="the night's summary at the webhook",
    )
    assert "points" in summary["subject"] and "Report: " in summary["body"]
    # A regression's event, as the report emits it (kernelsweep.report.notify), takes the same way.
    emit = (
        "from prefect.events import emit_event; emit_event(event='kernelsweep.regression', "
        "resource={'prefect.resource.id': 'kernelsweep.series.test'}, "
        "payload={'subject': 'kernelsweep regression: test 20% slower', 'body': 'since last night'})"
    )
    done = fleet_server.run(str(Path(sys.executable)), "-c", emit)
    assert done.returncode == 0, done.stderr
    poll(
        lambda: any(m.get("subject") == "kernelsweep regression: test 20% slower" for m in webhook) or None,
        timeout=120,
        what="the regression at the webhook",
    )
