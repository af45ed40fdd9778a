"""Several flow runs on one host at once (a worker with `--limit 2`, or two shards) share its
NeuronCores through the host's leases, never a core at the same time.

Real processes: two `kernelsweep run` commands started together against a real Prefect server (the
slow stage's shared one: the runs need a server, not a fleet), on one simulated host (one lease
folder, one simulated runtime). The simulated runtime refuses a core another process holds, as the
Neuron runtime does, and the capture task retries that refusal; so a capture task run with a run
count above 1 is a collision the leases should have prevented.

The test holds both of the host's cores until each run has a capture waiting for one (each says so on
stderr), so the two runs do meet at the cores however unevenly a loaded machine starts them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect_server import PrefectServer, poll, recorded_task_run, sim_host_env

from kernelsweep.locks import CoreLeaser
from kernelsweep.results import reader
from kernelsweep.sim.config import STATE_ENV

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


def _start(
    server: PrefectServer, client: dict[str, str], root: Path, name: str, host: dict[str, str]
) -> subprocess.Popen:
    """`kernelsweep run` of the spec `name` on `server`; its stderr goes to `root/name.err`."""
    spec = root / f"{name}.toml"
    spec.write_text(SPEC.format(name=name, root=root))
    with (root / f"{name}.err").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "kernelsweep.flows.cli", "run", str(spec)],
            env={**server.env, **client, **host},
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def test_two_flow_runs_on_one_host_never_capture_on_the_same_core_at_once(stage_server, server_client_env, tmp_path):
    host = sim_host_env(tmp_path / "host", "trn2", cores=2, KERNELSWEEP_SIM_TIME_SCALE="0.2")
    # The host's two cores at LNC=2, held here, in the folder where simulated runs lease them (the simulated
    # runtime's state folder; KERNELSWEEP_LOCK_DIR is a real host's). Held in KERNELSWEEP_LOCK_DIR, as they
    # once were, they stopped nothing: the runs never waited, and met only when a loaded machine let them.
    gate = CoreLeaser(Path(host[STATE_ENV]) / "leases", [0, 1], lnc=2)
    held = [gate.try_acquire("the test's gate"), gate.try_acquire("the test's gate")]
    assert all(held)
    held_here = f"every NeuronCore is busy (core 0: pid {os.getpid()} "  # what a run says, waiting for the gate
    runs = {name: _start(stage_server, server_client_env, tmp_path, name, host) for name in ("left", "right")}
    try:
        for name, run in runs.items():
            waiting = poll(
                lambda n=name, r=run: (
                    held_here in (err := (tmp_path / f"{n}.err").read_text())
                    or (r.poll() is not None and f"ended: {err}")
                ),
                timeout=300,
                what=f"the {name} run to wait for a core",
                every=0.2,
            )
            assert waiting is True, f"the {name} run never waited for the cores the test held; it {waiting}"
    finally:
        for lease in held:
            lease.release()
    for name, run in runs.items():
        run.wait(timeout=600)
        assert run.returncode == 0, (tmp_path / f"{name}.err").read_text()

    rows = {name: reader.read(str(tmp_path / f"results-{name}")).to_pylist() for name in ("left", "right")}
    assert all(len(r) == 6 and all(x["status"] == "ok" for x in r) for r in rows.values())
    both = rows["left"] + rows["right"]
    captures = [dict(r["task_run_ids"])["capture"] for r in both]
    run_counts = [recorded_task_run(capture, stage_server.api_url)["run_count"] for capture in captures]
    assert run_counts == [1] * 12  # the runtime never refused a core: no two captures met on one
    assert {r["visible_cores"] for r in rows["left"]} & {r["visible_cores"] for r in rows["right"]}  # cores shared
    spans = [(r["started_at"], r["finished_at"]) for r in rows["left"]]
    others = [(r["started_at"], r["finished_at"]) for r in rows["right"]]
    assert any(a[0] < b[1] and b[0] < a[1] for a in spans for b in others)  # the two runs' points overlapped
