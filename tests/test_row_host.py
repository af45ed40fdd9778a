"""A fleet shard's rows name their host as the fleet knows it (issue 35): the worker's name Prefect gives
the flow runs it starts, read as the shard reads it (`locations_from_env`), through the point pool every
shard runs its points in; the machine's own name is kept in `hostname`."""

from __future__ import annotations

import dataclasses
import socket

from specs import VECTOR_ADD, sim_spec
from stage_context import sim_context

from kernelsweep.flows.points import measure
from kernelsweep.flows.settings import WORKER_NAME_ENV, locations_from_env
from kernelsweep.sweepspec.expansion import expand


def test_a_shard_on_a_fleet_host_writes_rows_with_its_fleet_name_and_the_machines(
    tmp_path, prefect_harness, monkeypatch
):
    monkeypatch.setenv(WORKER_NAME_ENV, "trn2-fleet-a")
    monkeypatch.setenv("KERNELSWEEP_STATE_DIR", str(tmp_path / "state"))
    named = locations_from_env().host_name
    assert named == "trn2-fleet-a" != socket.gethostname()
    [p] = expand(sim_spec(tmp_path, [{**VECTOR_ADD, "grid": {"n": [2048], "free_size": [1]}}], name="named"))
    ctx = dataclasses.replace(sim_context(tmp_path), host_name=named)
    rows, unsaved = measure({p.toolchain_name: ctx}, [p], "run-named", None)
    assert unsaved is None and [r.status for r in rows] == ["ok"]
    assert [(r.host, r.hostname) for r in rows] == [("trn2-fleet-a", socket.gethostname())]
    assert rows[0].record()["host"] == "trn2-fleet-a"
