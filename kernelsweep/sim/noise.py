"""The simulator's run-level noise: a shift a whole run takes, and one a host keeps.

Real measurements differ between runs as well as between the repeats of one run: another boot,
another NeuronCore and its HBM placement, clocks and thermals, another host of the same type. The
repeats of one run cannot show that, so a test that only sees per-repeat jitter proves nothing about
run-against-run verdicts. Here every capture's modelled time is multiplied by

    (1 + run_noise x N_session,point) x (1 + shared_noise x N_session) x (1 + host_noise x N_host)

where N_session,point is one standard normal draw per point per session of the simulated device (a
session: each time the simulated toolchain is set up, i.e. once per flow run), shared by all the
repeats of that point in that run; N_session one per session, shared by every point of the run (a
whole run on a slower host of the type, another driver, a hot rack: the points move together, so
their false calls would come together too); and N_host one per host name, shared by everything the
host runs. With KERNELSWEEP_SIM_NOISE_SEED the k-th session of a state dir draws the same shifts.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from pathlib import Path

from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.model import unit_normal


def new_session(state_dir: Path) -> str:
    """A session id: its number in this state dir (for seeded draws) and a fresh token (for unseeded)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / "sessions.count", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        count = int(os.read(fd, 32) or b"0")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(count + 1).encode())
    finally:
        os.close(fd)
    return f"{count}:{uuid.uuid4().hex}"


def run_factor(config: SimConfig, point: str) -> float:
    """What this capture's session (for this point) and host multiply every execution's time by."""
    number, _, token = config.session.partition(":")
    session = f"seed {config.noise_seed}:session {number}" if config.noise_seed else f"session {token or number}"
    host = f"host {config.host}:seed {config.noise_seed or ''}"
    run = 1.0
    if config.session:
        run = (1 + config.run_noise * unit_normal(f"{session}:{point}")) * (
            1 + config.shared_noise * unit_normal(session)
        )
    return run * (1 + config.host_noise * unit_normal(host))
