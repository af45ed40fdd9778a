"""Several flow runs on one host at once (a worker with `--limit 2`, or two shards) share its
NeuronCores through the host's leases, never a core at the same time.

Real processes: two `kernelsweep run` commands started together against a real Prefect server, on one
simulated host (one lease folder, one simulated runtime). The simulated runtime refuses a core another
process holds, as the Neuron runtime does, and the capture task retries that refusal; so a capture
task run with a run count above 1 is a collision the leases should have prevented.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prefect_server import PrefectServer, sim_host_env

from kernelsweep.results import reader

pytestmark = pytest.mark.slow

SPEC = """
name = "{name}"
platforms = ["trn2"]
toolchain = "sim"
results = "{root}/results-{name}"
artifacts = "{root}/artifacts"
[capture]
num_exec = 2
[[kernels]]
kernel = "vector_add"
dtypes = ["float32"]
grid = {{ n = [4096], free_size = [1, 2, 4, 8, 16, 32] }}
"""


def _start(server: PrefectServer, root: Path, name: str, host: dict[str, str]) -> subprocess.Popen:
    spec = root / f"{name}.toml"
    spec.write_text(SPEC.format(name=name, root=root))
    return subprocess.Popen(
        [sys.executable, "-m", "kernelsweep.flows.cli", "run", str(spec)],
        env={**server.env, **host},
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_flow_runs_on_one_host_never_capture_on_the_same_core_at_once(fleet_server, tmp_path):
    host = sim_host_env(tmp_path / "host", "trn2", cores=2, KERNELSWEEP_SIM_TIME_SCALE="0.2")
    runs = [_start(fleet_server, tmp_path, name, host) for name in ("left", "right")]
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err

    rows = {name: reader.read(str(tmp_path / f"results-{name}")).to_pylist() for name in ("left", "right")}
    assert all(len(r) == 6 and all(x["status"] == "ok" for x in r) for r in rows.values())
    both = rows["left"] + rows["right"]
    run_counts = [fleet_server.api(f"/task_runs/{dict(r['task_run_ids'])['capture']}")["run_count"] for r in both]
    assert run_counts == [1] * 12  # the runtime never refused a core: no two captures met on one
    assert {r["visible_cores"] for r in rows["left"]} & {r["visible_cores"] for r in rows["right"]}  # cores shared
    spans = [(r["started_at"], r["finished_at"]) for r in rows["left"]]
    others = [(r["started_at"], r["finished_at"]) for r in rows["right"]]
    assert any(a[0] < b[1] and b[0] < a[1] for a in spans for b in others)  # the two runs' points overlapped
