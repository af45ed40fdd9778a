"""The flow layer's one reading of the environment: host-local folders, tool locations, lease timeout,
the Neuron SDK's interpreter (KERNELSWEEP_NEURON_PYTHON).

Host state (NeuronCore lease files, the simulator's device state) lives in a folder private to the
user: `KERNELSWEEP_STATE_DIR`, else `<tmp>/kernelsweep-<uid>`, created with mode 0700 and refused
when it is a link or another user's (a predictable shared folder must not be one anybody can
pre-create). `KERNELSWEEP_SIM_STATE` and `KERNELSWEEP_LOCK_DIR` move one part elsewhere, under the
same checks. Not "<tmp>/kernelsweep": a folder of the package's own name in a working directory on
sys.path would be imported as a namespace package in its place.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import tempfile
from pathlib import Path

from kernelsweep.errors import UsageError
from kernelsweep.fleet.cost import PRICES_ENV, parse_prices
from kernelsweep.locks import private_folder
from kernelsweep.sim.config import STATE_ENV, SimConfig, configured
from kernelsweep.this_host.context import DEFAULT_LEASE_TIMEOUT_SECONDS, Locations
from kernelsweep.toolchain.tracing.interpreter import NEURON_PYTHON_ENV

STATE_DIR_ENV = "KERNELSWEEP_STATE_DIR"
REPORTS_URL_ENV = "KERNELSWEEP_REPORTS_URL"  # a web server's base URL for the results' reports/ folder
SITE_URL_ENV = "KERNELSWEEP_SITE_URL"  # where a web server (or CloudFront) serves `<results>/site/`
LEASE_TIMEOUT_ENV = "KERNELSWEEP_LEASE_TIMEOUT_SECONDS"
MIN_STATE_FREE_BYTES = 4 << 20  # leases, the simulator's sessions, compile peaks: a few KiB a run
WORKER_NAME_ENV = "PREFECT__WORKER_NAME"  # set by a Prefect worker for the flow runs it starts


def host_name_from_env() -> str:
    """This host as the fleet names it: its worker's name (`prefect worker start --name`), else the
    machine's. Recorded with every NEFF it compiles, and on every shard it runs."""
    return os.environ.get(WORKER_NAME_ENV) or socket.gethostname()


def tool_paths_from_env() -> tuple[Path, ...]:
    """KERNELSWEEP_TOOL_PATHS: extra folders holding the Neuron tools, separated like PATH."""
    return tuple(Path(p) for p in os.environ.get("KERNELSWEEP_TOOL_PATHS", "").split(os.pathsep) if p)


def neuron_python_from_env() -> str | None:
    """KERNELSWEEP_NEURON_PYTHON: the Python of this host's Neuron SDK environment."""
    return os.environ.get(NEURON_PYTHON_ENV) or None


def reports_url_from_env() -> str | None:
    """KERNELSWEEP_REPORTS_URL: where a web server serves `<results>/reports/` (the report link's base)."""
    return os.environ.get(REPORTS_URL_ENV) or None


def site_url_from_env() -> str | None:
    """KERNELSWEEP_SITE_URL: where a web server serves `<results>/site/` (the site link's base)."""
    return os.environ.get(SITE_URL_ENV) or None


def prices_from_env() -> dict[str, float]:
    """KERNELSWEEP_PRICES over the dated default table (kernelsweep.fleet.cost): USD per instance-hour."""
    return parse_prices(os.environ.get(PRICES_ENV))


def state_folder() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV) or Path(tempfile.gettempdir()) / f"kernelsweep-{os.geteuid()}")


def lease_timeout_from_env() -> float:
    """KERNELSWEEP_LEASE_TIMEOUT_SECONDS: how long a capture waits for a NeuronCore before its point fails."""
    text = os.environ.get(LEASE_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_LEASE_TIMEOUT_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{LEASE_TIMEOUT_ENV}={text!r}: give a number of seconds above 0")
    return value


def locations_from_env() -> Locations:
    """Every folder checked (and made) here, so a bad one stops the CLI before any work; the
    simulator's settings too (the stand-in tools read them, but only after work has started)."""
    try:
        SimConfig.from_env()
    except ValueError as exc:
        raise UsageError(f"{exc}; fix or unset it") from None
    sim, locks, base = configured(STATE_ENV), os.environ.get("KERNELSWEEP_LOCK_DIR"), state_folder()
    if not (sim and locks):
        private_folder(base, "state folder")
    sim_dir = private_folder(Path(sim) if sim else base / "sim", "simulator state folder")
    lock_dir = private_folder(Path(locks) if locks else base / "leases", "lock folder")
    for folder, what, variable in ((sim_dir, "simulator state folder", "KERNELSWEEP_SIM_STATE"),
                                   (lock_dir, "lock folder", "KERNELSWEEP_LOCK_DIR")):  # fmt: skip
        fix = f"set {variable if os.environ.get(variable) else STATE_DIR_ENV} to a folder with room"
        check_room(folder, f"{what} {folder}", fix, MIN_STATE_FREE_BYTES)
    return Locations(
        sim_state_dir=sim_dir,
        lock_dir=lock_dir,
        tool_paths=tool_paths_from_env(),
        lease_timeout_seconds=lease_timeout_from_env(),
        neuron_python=neuron_python_from_env(),
        host_name=host_name_from_env(),
    )


def check_room(folder: str | Path, where: str, fix: str, minimum: int) -> None:
    """`folder` takes a file and has `minimum` bytes free; else one line: `where` (what the folder is
    and its path), what is wrong, and `fix`."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise UsageError(f"{where} cannot take a file ({exc.strerror}); free space there or {fix}") from None
    if free < minimum:
        raise UsageError(
            f"{where} has {free / 2**20:.1f} MiB free, under the {minimum >> 20} MiB a run needs; "
            f"free space there or {fix}"
        )
