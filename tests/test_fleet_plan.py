"""The fleet's shard plan and its deployment file, without a server."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from prefect import Flow
from specs import sim_spec

from kernelsweep.fleet.plan import NIGHTLY_VARIABLE, plan_shards, shard_deployment
from kernelsweep.sweepspec.expansion import expand

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("trn1", "trn2", "inf2")


def test_shards_hold_one_family_each_and_at_most_the_limit(tmp_path):
    kernel = {"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": [1024, 2048, 4096, 8192, 16384]}}
    points = expand(sim_spec(tmp_path, [kernel], platforms=("inf2", "trn2", "trn1")))
    shards = plan_shards(points, max_points=2)
    assert [s.index for s in shards] == list(range(len(shards)))  # numbered across the fleet run
    expected = [(family, size) for family in ("trn1", "trn2", "inf2") for size in (2, 2, 1)]  # platform order
    assert [(s.family, len(s.points)) for s in shards] == expected
    assert all({p.platform for p in s.points} == {s.family} for s in shards)
    assert sorted(p.point_id for s in shards for p in s.points) == sorted(p.point_id for p in points)
    assert [len(s.points) for s in plan_shards(points, max_points=4)] == [3, 2, 3, 2, 3, 2]  # even, not 4 + 1


def test_the_deployment_file_routes_each_family_to_its_own_pool():
    config = yaml.safe_load((REPO / "deployments/prefect.yaml").read_text())
    assert config["pull"] == []  # module entrypoints: nothing to fetch on a worker
    deployments = {(d["entrypoint"].rsplit(":", 1)[1], d["name"]): d for d in config["deployments"]}
    for family in FAMILIES:
        for flow, queue in (
            ("sweep", "urgent"),
            ("sweep_shard", "nightly"),
            ("kernel_run", "urgent"),
            ("bisect_step", "nightly"),
        ):
            assert deployments[flow, family]["work_pool"] == {"name": f"kernelsweep-{family}", "work_queue_name": queue}
    assert not any("schedules" in d for d in config["deployments"])  # the one nightly is set by `fleet up`
    assert deployments["fleet", "fleet"]["work_pool"]["name"] == "kernelsweep-control"
    assert deployments["fleet", "fleet"]["concurrency_limit"] == 1  # a second fleet run waits
    shard_flow = importlib.import_module("kernelsweep.flows.sweep").sweep_shard
    assert shard_deployment("trn2") == f"{shard_flow.name}/trn2"  # what the fleet flow submits to
    for deployment in config["deployments"]:
        module, name = deployment["entrypoint"].split(":")
        assert isinstance(getattr(importlib.import_module(module), name), Flow)
        if "spec" in deployment.get("parameters", {}):
            assert deployment["parameters"]["spec"] == "{{ prefect.variables.%s }}" % NIGHTLY_VARIABLE


@pytest.mark.slow  # five CLI subprocesses, each importing Prefect
@pytest.mark.parametrize(
    ("argv", "env", "code", "says"),
    [
        (["status"], {}, 2, "PREFECT_API_URL is not set; point it at the fleet's server"),
        (["status"], {"PREFECT_API_URL": "http://127.0.0.1:9/api"}, 3, "does not answer"),
        (
            ["status"],
            {"PREFECT_API_URL": "not a url"},
            2,
            "PREFECT_API_URL='not a url' is not an http(s) URL; give the server's API",
        ),  # a malformed URL is the user's mistake, not a server down
        (["status"], {"PREFECT_API_URL": "http://[::1/api"}, 2, "PREFECT_API_URL='http://[::1/api' is not"),
        (["up", "--spec", "nosuch.toml"], {"PREFECT_API_URL": "http://127.0.0.1:9/api"}, 2, "no such spec file"),
        (["up", "--spec", "{unwritable}"], {"PREFECT_API_URL": "http://127.0.0.1:9/api"}, 2, "cannot be written"),
    ],
)
def test_fleet_commands_fail_in_one_line(tmp_path, argv, env, code, says):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    spec = tmp_path / "unwritable.toml"  # results where nothing can be created: `fleet up` probes, as a run would
    spec.write_text(
        'name = "n"\nplatforms = ["trn2"]\ntoolchain = "sim"\nresults = "/proc/kernelsweep-nope/results"\n'
        f'artifacts = "{tmp_path}/artifacts"\n[[kernels]]\nkernel = "vector_add"\ndtypes = ["float32"]\n'
        "grid = { n = [2048] }\n"
    )
    argv = [arg.format(unwritable=spec) for arg in argv]
    done = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "fleet", *argv],
        env={**clean, "PREFECT_HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == code and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert says in line


def _modules_after(code: str) -> set[str]:
    """The heavy modules a fresh interpreter holds after `code`."""
    heavy = ("pyarrow", "prefect", "scipy", "ruptures", "kernelsweep.fleet.plan", "kernelsweep.flows.cli.run")
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stderr.split())


def test_a_hosts_worker_command_imports_none_of_the_other_fleet_commands():
    """Every host's unit runs `kernelsweep fleet worker` (and every fleet test's worker starts so): its
    start must not pay for `fleet up`'s imports, 1.4 s of CPU on this machine."""
    worker = (
        "from kernelsweep.flows.cli import main\ntry:\n"
        "    main(['fleet', 'worker', '--help'])\nexcept SystemExit:\n    pass"
    )
    assert _modules_after(worker) == set()
    listed = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "fleet", "--help"], capture_output=True, text=True, timeout=120
    )
    commands = listed.stdout.split("Commands:")[1].split()
    assert {"demo", "pause", "resume", "status", "up", "worker"} <= set(commands), listed.stdout + listed.stderr


def test_the_fleet_flow_loads_the_notice_names_without_the_report_and_its_scipy():
    """Each fleet flow run imports the automations (their event names); the report's modules load scipy
    and ruptures, about a second of every flow run's start."""
    assert not _modules_after("import kernelsweep.flows.fleet.automations") & {"scipy", "ruptures"}


def test_the_worker_puts_its_own_interpreter_on_path_as_python(tmp_path, monkeypatch):
    """The fleet's pools start flow runs as `python -m kernelsweep.flows.fleet.engine`: `python` must be
    the worker's own interpreter, also where the install has only a `python3` (a wrapper in a folder of
    its own then)."""
    from kernelsweep.flows.cli.fleet_worker import python_folder

    own = Path(python_folder()) / "python"
    ran = subprocess.run([str(own), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
    assert ran.stdout.strip() == sys.prefix  # this venv's
    only_python3 = tmp_path / "bin" / "python3"
    only_python3.parent.mkdir()
    only_python3.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(only_python3))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the wrapper's folder is this test's, not /tmp's
    wrapper = Path(python_folder()) / "python"
    assert wrapper.parent != only_python3.parent and python_folder() == str(wrapper.parent)  # the same one again
    ran = subprocess.run([str(wrapper), "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    assert ran.stdout.strip() == str(only_python3)


def test_a_compile_host_takes_one_shard_at_a_time_unless_told_and_other_hosts_are_unlimited():
    from kernelsweep.fleet.farm import COMPILE_POOL
    from kernelsweep.flows.cli import fleet_worker
    from kernelsweep.flows.cli.fleet_worker import worker_argv

    assert fleet_worker.COMPILE_POOL == COMPILE_POOL
    assert worker_argv("kernelsweep-compile", "c1", None)[-2:] == ["--limit", "1"]
    assert worker_argv("kernelsweep-compile", "c1", 4)[-2:] == ["--limit", "4"]
    assert "--limit" not in worker_argv("kernelsweep-trn2", "t1", None)


def test_each_pools_prefork_server_preloads_a_flow_that_exists():
    """What the prefork server imports at a host's first flow run: a name that no longer exists would
    stop the server there (its flow runs then start Prefect's engine themselves, at full cost)."""
    import importlib.util

    from kernelsweep.fleet.farm import COMPILE_POOL
    from kernelsweep.flows.fleet.prefork import flow_module
    from kernelsweep.flows.fleet.setup import CONTROL_POOL

    flows = {pool: flow_module(pool) for pool in (CONTROL_POOL, COMPILE_POOL, "kernelsweep-trn2")}
    assert flows == {
        CONTROL_POOL: "kernelsweep.flows.fleet.flow",
        COMPILE_POOL: "kernelsweep.flows.compile_shard",
        "kernelsweep-trn2": "kernelsweep.flows.sweep",
    }
    assert all(importlib.util.find_spec(module) for module in flows.values())
