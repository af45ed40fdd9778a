"""The flow layer's one reading of the environment: host-local folders and tool locations."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kernelsweep.context import Locations

# Not "<tmp>/kernelsweep": a folder of the package's own name in a working directory on sys.path
# would be imported as a namespace package in its place.
STATE_FOLDER = "kernelsweep-state"


def tool_paths_from_env() -> tuple[Path, ...]:
    """KERNELSWEEP_TOOL_PATHS: extra folders holding the Neuron tools, separated like PATH."""
    return tuple(Path(p) for p in os.environ.get("KERNELSWEEP_TOOL_PATHS", "").split(os.pathsep) if p)


def locations_from_env() -> Locations:
    base = Path(tempfile.gettempdir()) / STATE_FOLDER
    return Locations(
        sim_state_dir=Path(os.environ.get("KERNELSWEEP_SIM_STATE", base / "sim")),
        lock_dir=Path(os.environ.get("KERNELSWEEP_LOCK_DIR", base / "leases")),
        tool_paths=tool_paths_from_env(),
    )
