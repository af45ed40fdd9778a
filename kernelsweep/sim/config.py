"""Simulator settings, read from the environment the adapters pass to the stand-in tools.

KERNELSWEEP_SIM_STATE       folder for simulated device state (core locks, fault counters)
KERNELSWEEP_SIM_PLATFORM    the one platform family the simulated host is (trn1, trn2, inf2); unset: every
                            family, so one machine can run a whole mixed-platform sweep
KERNELSWEEP_SIM_CORES       logical NeuronCores the simulated host exposes (default 2)
KERNELSWEEP_SIM_LNC         logical core config the simulated host reports (default 1)
KERNELSWEEP_SIM_TIME_SCALE  emulate tool latencies: seconds slept = modelled seconds x scale (default 0)
KERNELSWEEP_SIM_IMPORT_PATH folders appended to the stand-in's import path (the sweep's, for kernels)
KERNELSWEEP_SIM_FAULTS      injected faults, e.g. `capture-busy=2,compile-error=mlp` (see sim.faults):
                              capture-busy=N     first N captures: the NRT busy error (transient)
                              capture-timeout=N  first N captures hang until the caller's timeout
                              compile-error=K    compiles of kernel K: an NCC diagnostic (deterministic)
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelsweep.sim.faults import FAULTS_ENV, Faults, parse_faults

IMPORT_PATH_ENV = "KERNELSWEEP_SIM_IMPORT_PATH"


def extend_import_path() -> None:
    """Make the sweep's kernel modules importable, after (never before) the installed packages."""
    for entry in os.environ.get(IMPORT_PATH_ENV, "").split(os.pathsep):
        if entry and entry not in sys.path:
            sys.path.append(entry)


@dataclass(frozen=True)
class SimConfig:
    state_dir: Path
    platform: str | None
    cores: int
    lnc: int
    time_scale: float
    faults: Faults = field(default_factory=Faults)

    @classmethod
    def from_env(cls) -> SimConfig:
        env = os.environ
        state = env.get("KERNELSWEEP_SIM_STATE") or os.path.join(tempfile.gettempdir(), "kernelsweep-sim")
        return cls(
            state_dir=Path(state),
            platform=env.get("KERNELSWEEP_SIM_PLATFORM") or None,
            cores=_number("KERNELSWEEP_SIM_CORES", "2", int, 1),
            lnc=_number("KERNELSWEEP_SIM_LNC", "1", int, 1),
            time_scale=_number("KERNELSWEEP_SIM_TIME_SCALE", "0", float, 0),
            faults=parse_faults(env.get(FAULTS_ENV, "")),
        )


def _number(name: str, default: str, kind: type[int] | type[float], minimum: float) -> Any:
    """A bad value is a ValueError naming the variable (the CLI turns it into one line before any work)."""
    text = os.environ.get(name, default)
    try:
        value = kind(text)
    except ValueError:
        value = math.nan
    if not minimum <= value < math.inf:
        raise ValueError(f"{name}={text!r}: give a{'n' if kind is int else ''} {kind.__name__} of at least {minimum}")
    return value
