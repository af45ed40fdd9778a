"""The flow layer's one reading of the environment: host-local folders for the sim and leases."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kernelsweep.runtime import Locations


def locations_from_env() -> Locations:
    base = Path(tempfile.gettempdir()) / "kernelsweep"
    return Locations(
        sim_state_dir=Path(os.environ.get("KERNELSWEEP_SIM_STATE", base / "sim")),
        lock_dir=Path(os.environ.get("KERNELSWEEP_LOCK_DIR", base / "leases")),
    )
