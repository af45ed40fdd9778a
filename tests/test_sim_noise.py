"""The simulator's run-level noise: on by default, seeded, one shift per point per session (shared by
that run's repeats) and one per host; and the zeros fault's setting."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kernelsweep.sim.config import DEFAULT_RUN_NOISE, SimConfig
from kernelsweep.sim.faults import parse_faults
from kernelsweep.sim.noise import new_session, run_factor


def _config(tmp_path: Path, **changes: object) -> SimConfig:
    base = SimConfig(state_dir=tmp_path, platform=None, cores=2, lnc=2, time_scale=0, nki="0.6")
    return replace(base, **changes)  # type: ignore[arg-type]


def test_run_noise_is_on_by_default_and_each_session_shifts_each_point_on_its_own(tmp_path, monkeypatch):
    for name in ("KERNELSWEEP_SIM_RUN_NOISE", "KERNELSWEEP_SIM_HOST_NOISE", "KERNELSWEEP_SIM_SHARED_NOISE",
                 "KERNELSWEEP_SIM_SESSION"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    assert SimConfig.from_env().run_noise == DEFAULT_RUN_NOISE == 0.01
    assert SimConfig.from_env().shared_noise == 0.005
    sessions = [new_session(tmp_path) for _ in range(200)]
    assert [s.split(":")[0] for s in sessions[:3]] == ["0", "1", "2"]  # numbered per state dir
    seeded = [_config(tmp_path, session=s, noise_seed="7") for s in sessions]
    shifts = np.array([run_factor(c, "point-a") for c in seeded])
    assert 0.0085 < shifts.std() < 0.0140  # 1% per point and 0.5% shared: 1.1% (the host's is a constant here)
    other = np.array([run_factor(c, "point-b") for c in seeded])
    assert 0.05 < np.corrcoef(shifts, other)[0, 1] < 0.45  # each point its own shift, and the run's shared one
    alone = np.array([run_factor(replace(c, shared_noise=0.0), "point-a") for c in seeded])
    apart = np.array([run_factor(replace(c, shared_noise=0.0), "point-b") for c in seeded])
    assert abs(np.corrcoef(alone, apart)[0, 1]) < 0.2  # without the shared shift, points move on their own
    common = np.array([run_factor(replace(c, run_noise=0.0), "point-a") for c in seeded])
    assert 0.003 < common.std() < 0.007
    assert common.tolist() == [run_factor(replace(c, run_noise=0.0), "point-b") for c in seeded]  # the whole run
    again = [run_factor(_config(tmp_path, session=s, noise_seed="7"), "point-a") for s in sessions[:5]]
    assert again == list(shifts[:5])  # seeded: the k-th session draws the same shift
    assert run_factor(_config(tmp_path, session=sessions[0], noise_seed="8"), "point-a") != shifts[0]


def test_hosts_differ_and_noise_can_be_turned_off(tmp_path):
    session = new_session(tmp_path)
    quiet = _config(tmp_path, session=session, run_noise=0.0, host_noise=0.0, shared_noise=0.0)
    assert run_factor(quiet, "p") == 1.0
    hosts = {run_factor(_config(tmp_path, session=session, run_noise=0.0, shared_noise=0.0, host=f"h{i}"), "p")
             for i in range(20)}  # fmt: skip
    assert len(hosts) == 20 and all(0.97 < h < 1.03 for h in hosts)


def test_the_zeros_fault_names_kernels():
    assert parse_faults("zeros=vector_add,zeros=mlp").zero_outputs == {"vector_add", "mlp"}
    with pytest.raises(ValueError, match="KERNELSWEEP_SIM_FAULTS"):
        parse_faults("zeros")


def test_the_same_point_compiles_to_the_same_neff_bytes_in_another_folder(tmp_path):
    """The seeded per-repeat noise is drawn from the NEFF's bytes: a NEFF that named the trace worker's
    temporary folder made every build of a seeded dataset (and every fresh clone) draw other noise."""
    from stage_context import point, sim_context

    from kernelsweep.stages import compile_stage, trace_stage

    p = point("vector_add")
    neffs = []
    for name in ("first", "second"):
        ctx = sim_context(tmp_path / name, env={"KERNELSWEEP_SIM_NOISE_SEED": "7"})
        neffs.append(compile_stage(ctx, p, trace_stage(ctx, p)).neff.sha256)
    assert neffs[0] == neffs[1]
