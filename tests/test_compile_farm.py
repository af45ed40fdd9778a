"""The compile farm's core (kernelsweep.fleet.farm): a compile host's NEFF found by a capture host under the
same cache key, the row naming the host that compiled it, and the SDK check a compile shard makes."""

from __future__ import annotations

import dataclasses
import importlib
import threading
from pathlib import Path
from uuid import UUID

import pytest
from specs import sim_spec
from stage_context import point, sim_context

from kernelsweep.chain import run_stages
from kernelsweep.errors import UsageError
from kernelsweep.fleet.cost import COMPILE, RunCost, parse_prices
from kernelsweep.fleet.farm import compile_toolchain, family_sdks, prepare_compile, sdk_mismatch
from kernelsweep.fleet.hosts import HostReport
from kernelsweep.results.rows import PointRecord, Row, build_row
from kernelsweep.stages import compile_stage, trace_stage
from kernelsweep.sweepspec import Point
from kernelsweep.this_host.context import Locations


def _host(root: Path, name: str, **env: str):
    ctx = sim_context(root, env=env)
    return dataclasses.replace(ctx, host_name=name)


def _row(ctx, p) -> tuple[PointRecord, Row]:
    """A point's trace and compile on `ctx`, and the row they make (the NEFF's provenance is all here)."""
    record = run_stages(ctx, p, compile_only=True)
    assert record is not None and record.error is None, record
    return record, build_row(record, flow_run_id="run", toolchain="sim", is_simulation=True, versions=ctx.versions)


def test_a_capture_host_finds_the_compile_hosts_neff_and_compiles_nothing(tmp_path: Path) -> None:
    store = tmp_path / "shared"
    farm = _host(tmp_path / "farm", "compile-a")
    farm = dataclasses.replace(farm, store=type(farm.store)(store / "artifacts"))
    p = point()
    built = compile_stage(farm, p, trace_stage(farm, p))
    assert not built.cache_hit and built.compile_host == "compile-a"

    capture = _host(tmp_path / "trn2", "trn2-a")
    capture = dataclasses.replace(capture, store=type(capture.store)(store / "artifacts"))
    record, row = _row(capture, p)
    assert record.trace.cache_hit and record.compiled.cache_hit
    assert record.compiled.neff == built.neff
    assert row.neff_compile_host == "compile-a" and row.compile_seconds is None


def test_a_miss_compiles_locally_and_the_row_names_this_host(tmp_path: Path) -> None:
    capture = _host(tmp_path / "trn2", "trn2-a")
    record, row = _row(capture, point())
    assert not record.compiled.cache_hit
    assert row.neff_compile_host == "trn2-a" and row.compile_seconds is not None


def test_another_compiler_version_misses_the_farms_neff(tmp_path: Path) -> None:
    """The key holds the compiler version: a farm on another SDK leaves nothing a capture host can use."""
    farm = _host(tmp_path / "farm", "compile-a", KERNELSWEEP_SIM_COMPILER_VERSION="2.99.0.0")
    p = point()
    compile_stage(farm, p, trace_stage(farm, p))
    capture = dataclasses.replace(_host(tmp_path / "trn2", "trn2-a"), store=farm.store)
    traced = trace_stage(capture, p)
    assert not traced.cache_hit and traced.compile_host == "trn2-a"


REPORTS = [
    HostReport("trn2-b", "trn2", {"compiler": "2.22", "nki": "0.7", "runtime": "r", "profiler": "p"}),
    HostReport("trn2-a", "trn2", {"compiler": "2.21", "nki": "0.6", "runtime": "r", "profiler": "p"}),
    HostReport("sim", None, {"compiler": "2.20", "nki": "0.5"}),
]


def test_the_family_sdk_is_its_newest_report() -> None:
    assert family_sdks(REPORTS) == {"trn2": {"compiler": "2.22", "nki": "0.7"}}


@pytest.mark.parametrize(
    ("have", "expected", "refused"),
    [
        (
            {"compiler": "2.21", "nki": "0.7"},
            {"compiler": "2.22", "nki": "0.7"},
            "compiler 2.21 (the trn2 hosts run 2.22)",
        ),
        ({"compiler": "2.22", "nki": None}, {"compiler": "2.22", "nki": "0.7"}, "nki unknown (the trn2 hosts run 0.7)"),
    ],
)
def test_a_compile_host_with_another_sdk_refuses_in_one_line(have, expected, refused) -> None:
    problem = sdk_mismatch("compile-a", "trn2", have, expected)
    assert problem is not None and refused in problem and "compile-a" in problem and "\n" not in problem


@pytest.mark.parametrize(
    ("have", "expected"),
    [
        ({"compiler": "2.22", "nki": "0.7"}, {"compiler": "2.22", "nki": "0.7"}),  # the family's own SDK
        ({"compiler": "2.22", "nki": "0.6"}, None),  # no trn2 host has reported yet: nothing to hold it to
    ],
)
def test_a_compile_host_with_the_familys_sdk_or_none_to_match_compiles(have, expected) -> None:
    assert sdk_mismatch("compile-a", "trn2", have, expected) is None


def test_a_compile_host_needs_no_device(tmp_path: Path) -> None:
    """No neuron-ls and no leases: the compile context is built from the compiler alone."""
    spec = sim_spec(tmp_path, [{"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": [2048]}}])
    locations = Locations(sim_state_dir=tmp_path / "sim", lock_dir=tmp_path / "locks", host_name="compile-a")
    ctx = prepare_compile(spec, locations)
    assert ctx.leasers == {} and ctx.capture_slots == 0 and ctx.host_name == "compile-a"
    assert ctx.toolchain.kind == "sim" and ctx.versions.compiler


def test_neuron_on_a_host_without_a_compiler_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = sim_spec(tmp_path, [{"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": [2048]}}])
    spec = spec.model_copy(update={"toolchain": "neuron", "neuron_python": "/usr/bin/python3"})
    locations = Locations(sim_state_dir=tmp_path / "sim", lock_dir=tmp_path / "locks")
    with pytest.raises(UsageError, match="no neuronx-cc"):
        compile_toolchain(spec, locations)


def test_a_simulated_host_with_no_cores_has_no_device_to_capture_on(tmp_path: Path) -> None:
    """KERNELSWEEP_SIM_CORES=0, as the e2e test's compile hosts run: neuron-ls lists no device, so
    a capture there fails rather than pass for one."""
    from kernelsweep.toolchain.devices import list_devices

    ctx = sim_context(tmp_path, env={"KERNELSWEEP_SIM_CORES": "0"})
    assert list_devices(ctx.toolchain, default_lnc=2, lnc=2).free_cores == []


def test_a_runs_cost_splits_neuron_and_cpu_hours_and_prices_them() -> None:
    cost = RunCost({"trn1": 1800.0, "trn2": 3600.0, COMPILE: 7200.0}, points=500)
    assert cost.neuron_hours == 1.5 and cost.cpu_hours == 2.0 and cost.per_thousand(cost.neuron_hours) == 3.0
    prices = parse_prices("trn2=40,compile=1.5")
    usd, unpriced = cost.cost(prices)
    assert usd == pytest.approx(0.5 * 21.50 + 40 + 2 * 1.5) and unpriced == []
    table = "\n".join(cost.lines(prices))
    assert (
        "| Neuron-host-hours | 1.500 | 3.000 |" in table
        and "| CPU-host-hours (compile farm) | 2.000 | 4.000 |" in table
    )
    assert f"(2026-11-26 prices) | ${usd:,.2f} | ${usd * 2:,.2f} |" in table


def test_a_pool_without_a_price_is_named_not_counted_as_free() -> None:
    usd, unpriced = RunCost({"trn2": 3600.0}, points=10).cost(parse_prices(None))
    assert usd == 0 and unpriced == ["trn2"]
    assert "without trn2: no price; set KERNELSWEEP_PRICES" in "\n".join(
        RunCost({"trn2": 1.0}, 1).lines(parse_prices(""))
    )


@pytest.mark.parametrize("text", ["trn2=abc", "trn9=3", "trn2=-1", "trn2"])
def test_a_bad_price_is_one_line_naming_the_fix(text: str) -> None:
    with pytest.raises(UsageError, match="KERNELSWEEP_PRICES: bad entry .* give POOL=USD per hour"):
        parse_prices(text)


def test_lineage_says_where_the_neff_came_from() -> None:
    from kernelsweep.results.verify import neff_origin

    stored = {"neff_compile_host": "compile-a", "compile_cache_hit": True}
    assert neff_origin(stored) == "NEFF compiled on compile-a (found in the artifact store)"
    assert (
        neff_origin({"neff_compile_host": "trn2-a", "compile_cache_hit": False})
        == "NEFF compiled on trn2-a (in this run)"
    )
    assert neff_origin({"neff_compile_host": None, "compile_cache_hit": True}) is None  # a row older than schema 4


@pytest.mark.usefixtures("prefect_harness")
def test_the_compile_shard_flow_compiles_each_point_once_and_leaves_a_failure_to_its_capture_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelsweep.flows.compile_shard import compile_shard
    from kernelsweep.sweepspec.expansion import expand

    monkeypatch.setenv("KERNELSWEEP_SIM_FAULTS", "compile-error=mlp")
    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))
    mlp = {
        "kernel": "kernelsweep.kernels.mlp:mlp",
        "dtypes": ["bfloat16"],
        "grid": {"s": [128], "h": [256], "i": [128]},
    }
    vector_add = {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"], "grid": {"n": [2048]}}
    spec = sim_spec(tmp_path, [vector_add, mlp])
    points = expand(spec)
    assert compile_shard(spec, points, shard=0, target="trn2").endswith(": 1 compiled, 1 failed")
    assert compile_shard(spec, points, shard=0, target="trn2").endswith(": 1 in the store already, 1 failed")


@pytest.mark.usefixtures("prefect_harness")
def test_a_search_batch_is_one_compile_run_of_the_farm_and_a_farm_without_a_worker_leaves_it_to_this_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch goes to the farm's deployment as one compile run (the same batch again in the same shard
    run is that run, never a second compile), and the shard waits for it: with no compile worker online for
    `execution.worker_wait_seconds` it is cancelled, saying so, and the shard goes on to compile itself.
    The fleet run's cost counts that run, a child of its search shard, as the farm's."""
    from prefect import flow, get_client, tags
    from prefect.runtime import flow_run

    import kernelsweep.flows.fleet.wait as wait
    from kernelsweep.fleet import Shard
    from kernelsweep.fleet.farm import COMPILE_DEPLOYMENT, COMPILE_POOL
    from kernelsweep.flows.compile_shard import compile_shard
    from kernelsweep.flows.fleet.farm import compile_batch
    from kernelsweep.flows.fleet.setup import ensure_pools
    from kernelsweep.flows.fleet.summary import fleet_cost
    from kernelsweep.sweepspec.expansion import expand

    monkeypatch.setattr(wait, "POLL_SECONDS", 0.05)
    spec = sim_spec(tmp_path, [{"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": [2048, 4096]}}])
    spec = spec.model_copy(update={"execution": spec.execution.model_copy(update={"worker_wait_seconds": 0.1})})
    batch = expand(spec)
    with get_client(sync_client=True) as client:
        ensure_pools(client, [COMPILE_POOL])
        deployment = client.create_deployment(
            flow_id=client.create_flow(compile_shard),
            name=COMPILE_DEPLOYMENT.split("/")[1],
            work_pool_name=COMPILE_POOL,
            entrypoint="flows/compile_shard.py:compile_shard",
        )
    expect = {"compiler": "2.21.0", "nki": "0.6.0"}

    @flow
    def search_shard() -> list[tuple[str, str]]:
        return [compile_batch(spec, Shard(5, "trn2", batch), expect, "fleet-1") for _ in range(2)]

    @flow
    def fleet() -> tuple[list[tuple[str, str]], str]:
        with tags("fleet", "trn2", "search"):
            return search_shard(), str(flow_run.id)

    ended, fleet_run = fleet()
    assert ended[0] == ended[1] and ended[0][0] == "CANCELLED"
    assert "no trn2 worker online in work pool kernelsweep-compile" in ended[0][1]
    with get_client(sync_client=True) as client:
        [run] = [r for r in client.read_flow_runs() if r.deployment_id == deployment]
        cost = fleet_cost(client, UUID(fleet_run))
    assert cost is not None and set(cost.seconds) == {"trn2", COMPILE}
    assert {"compile", "search", "trn2"} <= set(run.tags) and run.parameters["shard"] == 5
    assert run.parameters["expect"] == expect and run.parameters["fleet_run_id"] == "fleet-1"
    assert [Point.model_validate(p) for p in run.parameters["points"]] == batch


def _farm_deployment() -> UUID:
    """The farm's pool and its `compile-shard/compile` deployment, as `kernelsweep fleet up` makes them."""
    from prefect import get_client

    from kernelsweep.fleet.farm import COMPILE_DEPLOYMENT, COMPILE_POOL
    from kernelsweep.flows.compile_shard import compile_shard
    from kernelsweep.flows.fleet.setup import ensure_pools

    with get_client(sync_client=True) as client:
        ensure_pools(client, [COMPILE_POOL])
        return client.create_deployment(
            flow_id=client.create_flow(compile_shard),
            name=COMPILE_DEPLOYMENT.split("/")[1],
            work_pool_name=COMPILE_POOL,
            entrypoint="flows/compile_shard.py:compile_shard",
        )


class _FarmHost:
    """A compile worker of the farm in this process: it beats in the compile pool as `compile-a` and runs each
    compile run scheduled there through Prefect's flow engine (the `compile_shard` flow, with the parameters
    the server holds), as a worker's flow run process would. With `leaves`, it leaves the pool (its worker
    deleted) on seeing a run instead: a compile host gone before it took the run."""

    NAME = "compile-a"

    def __init__(self, leaves: bool = False) -> None:
        import contextvars

        self.leaves, self.done = leaves, threading.Event()
        self.thread = threading.Thread(target=contextvars.copy_context().run, args=(self._serve,), daemon=True)

    def __enter__(self) -> _FarmHost:
        from prefect import get_client

        from kernelsweep.fleet.farm import COMPILE_POOL

        with get_client(sync_client=True) as client:
            client.send_worker_heartbeat(
                COMPILE_POOL, self.NAME, heartbeat_interval_seconds=30
            )  # online before it starts
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(timeout=30)

    def _serve(self) -> None:
        from prefect import get_client
        from prefect.flow_engine import run_flow

        from kernelsweep.fleet.farm import COMPILE_POOL
        from kernelsweep.flows.compile_shard import compile_shard

        with get_client(sync_client=True) as client:
            while not self.done.wait(0.2):
                for scheduled in client.get_scheduled_flow_runs_for_work_pool(COMPILE_POOL):
                    if self.leaves:
                        client.request("DELETE", "/work_pools/{work_pool_name}/workers/{name}",
                                       path_params={"work_pool_name": COMPILE_POOL, "name": self.NAME})  # fmt: skip
                        return
                    run = scheduled.flow_run
                    run_flow(compile_shard, flow_run=run, parameters=run.parameters, return_type="state")


GOOD_BUILD, BAD_BUILD = "2.22.1.0", "2.22.2.0"  # neither is the simulated host's own compiler (2.21...)


@pytest.mark.usefixtures("prefect_harness")
def test_a_bisect_steps_neff_is_compiled_on_the_farm_as_its_build_and_a_farm_that_takes_no_run_leaves_it_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a build's first run, the bisect flow sends its point to the farm as a compile run carrying the
    build (the tools' variables, not this process's: the farm compiles in a thread pool, and here, in this
    process, the build is not set while it compiles), so each run measured finds that NEFF in the store,
    compiled by the farm's host under its own build. A compile host gone before it took the run: the run is
    cancelled after `execution.worker_wait_seconds` and this host compiles the build's NEFF itself."""
    from prefect import flow, get_client

    import kernelsweep.flows.compile_shard as compile_flow
    import kernelsweep.flows.fleet.wait as wait
    from kernelsweep.bench import measure
    from kernelsweep.bisect.axis import builds_axis
    from kernelsweep.bisect.request import StepRequest

    bisect_module = importlib.import_module("kernelsweep.flows.bisect")  # the module (the package names the flow)
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.results import reader
    from kernelsweep.sim import SIM_VERSION_SUFFIX
    from kernelsweep.sweepspec.expansion import expand

    monkeypatch.setattr(wait, "POLL_SECONDS", 0.05)
    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))
    monkeypatch.setenv("KERNELSWEEP_SIM_CULPRIT_BUILD", f"{BAD_BUILD}@vector_add:1.5")
    from_env = compile_flow.locations_from_env  # the farm's host is this process, under its own name
    monkeypatch.setattr(
        compile_flow, "locations_from_env", lambda: dataclasses.replace(from_env(), host_name="compile-a")
    )
    deployment = _farm_deployment()
    spec = sim_spec(tmp_path, [{"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": [2048]}}])
    spec = spec.model_copy(update={"execution": spec.execution.model_copy(update={"worker_wait_seconds": 0.1})})
    request = StepRequest(
        "vector_add", "n=2048", "float32", "trn2", "2026-11-27", str(tmp_path / "results"), GOOD_BUILD, BAD_BUILD,
        10.0, 15.0, 50.0, 40.0, 60.0, "3 v 3",
    )  # fmt: skip
    with _FarmHost():
        said = bisect_module.bisect_step(request.as_json(), spec, max_runs=2, repeats=1)
    assert said.endswith(f"build {BAD_BUILD} made it slower"), said  # the farm's NEFFs are the builds' own
    columns = ["compiler_version", "neff_compile_host", "compile_cache_hit"]
    rows = reader.read(str(tmp_path / "results"), columns=columns).to_pylist()
    assert len(rows) >= 4 and {r["compiler_version"] for r in rows} == {
        b + SIM_VERSION_SUFFIX for b in (GOOD_BUILD, BAD_BUILD)
    }
    assert all(r["neff_compile_host"] == "compile-a" and r["compile_cache_hit"] for r in rows), rows
    with get_client(sync_client=True) as client:
        runs = [r for r in client.read_flow_runs() if r.deployment_id == deployment and "bisect" in r.tags]
    built = sorted(r.parameters["toolchain_env"]["KERNELSWEEP_SIM_COMPILER_VERSION"] for r in runs)
    assert built == [GOOD_BUILD, BAD_BUILD]  # one compile run a build, however often it is measured
    assert all(r.state.is_completed() for r in runs)
    assert all(r.parameters["toolchain_env"]["KERNELSWEEP_SIM_CULPRIT_BUILD"] for r in runs)  # how builds behave

    other = spec.model_copy(update={"artifacts": str(tmp_path / "other-store")})  # nothing compiled in it yet
    [point] = expand(other)
    build = builds_axis(["2.22.3.0", "2.22.4.0"], None, None).build_env(0)
    assert build is not None

    @flow
    def bisect_flow() -> None:  # the bisect flow's hook, before a build's first run
        bisect_module._on_the_farm(other, point, build)

    with _FarmHost(leaves=True):
        bisect_flow()
    with get_client(sync_client=True) as client:
        bisects = [r for r in client.read_flow_runs() if r.deployment_id == deployment and "bisect" in r.tags]
    [cancelled] = [r for r in bisects if r.id not in {done.id for done in runs}]
    assert "no trn2 worker online in work pool kernelsweep-compile" in (cancelled.state.message or "")
    monkeypatch.setenv("KERNELSWEEP_SIM_COMPILER_VERSION", "2.22.3.0")  # the build, as the bisect measures it
    row, _, _ = measure(other, point, locations_from_env(), "run")
    assert row.status == "ok" and not row.compile_cache_hit and row.neff_compile_host == row.host != "compile-a"
