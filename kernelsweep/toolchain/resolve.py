"""Which executables a sweep runs: the real Neuron tools or the simulator's stand-ins.

The adapters only ever see a `Toolchain`: a command prefix per tool plus extra environment. For the
real SDK the prefix is the executable's path; for the simulator it is this Python running the
stand-in module, so the simulator is never put on the user's PATH and the adapters' argv, parsing
and error handling are the same code either way.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelsweep.errors import ToolNotFoundError, UsageError

NEURON_BIN_DIR = Path("/opt/aws/neuron/bin")
TOOLS = ("neuronx-cc", "neuron-profile", "neuron-explorer", "neuron-ls")
_SIM_MODULES = {
    "neuronx-cc": "kernelsweep.sim.neuronx_cc",
    "neuron-profile": "kernelsweep.sim.neuron_profile",
    "neuron-explorer": "kernelsweep.sim.neuron_explorer",
    "neuron-ls": "kernelsweep.sim.neuron_ls",
}


@dataclass(frozen=True)
class Toolchain:
    kind: str  # "neuron" or "sim"
    commands: Mapping[str, tuple[str, ...]]
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_simulation(self) -> bool:
        return self.kind == "sim"

    def command(self, tool: str) -> list[str]:
        try:
            return list(self.commands[tool])
        except KeyError:
            raise ToolNotFoundError(
                f"{tool} not found on PATH or in {NEURON_BIN_DIR}; install the Neuron SDK tools "
                "or run with --toolchain sim"
            ) from None

    @property
    def profiler(self) -> str:
        """neuron-explorer replaced neuron-profile (SDK 2.30); prefer it when both exist."""
        for name in ("neuron-explorer", "neuron-profile"):
            if name in self.commands:
                return name
        return "neuron-profile"


def tool_search_path(path: str | None = None, extra_paths: Sequence[str | Path] = ()) -> str:
    """Where the real tools are looked for: configured paths first, then PATH, then the SDK's bin."""
    parts = [
        *(str(p) for p in extra_paths),
        path if path is not None else os.environ.get("PATH", ""),
        str(NEURON_BIN_DIR),
    ]
    return os.pathsep.join(p for p in parts if p)


def find_neuron_tools(
    search_path: str | None = None, extra_paths: Sequence[str | Path] = ()
) -> dict[str, tuple[str, ...]]:
    path = tool_search_path(search_path, extra_paths)
    found = {}
    for tool in TOOLS:
        exe = shutil.which(tool, path=path)
        if exe:
            found[tool] = (exe,)
    return found


def neuron_devices(dev_dir: Path = Path("/dev")) -> list[Path]:
    """The Neuron driver's device nodes (`/dev/neuron0`, ...); none means no usable device."""
    return sorted(p for p in dev_dir.glob("neuron*") if p.name[len("neuron") :].isdigit())


def neuron_available(tools: Mapping[str, tuple[str, ...]], dev_dir: Path = Path("/dev")) -> bool:
    """The real toolchain needs a compiler, a profiler and a visible Neuron device."""
    has_profiler = "neuron-profile" in tools or "neuron-explorer" in tools
    return "neuronx-cc" in tools and has_profiler and bool(neuron_devices(dev_dir))


def sim_toolchain(state_dir: str | Path, env: Mapping[str, str] | None = None) -> Toolchain:
    commands = {tool: (sys.executable, "-m", module) for tool, module in _SIM_MODULES.items()}
    # The stand-ins import the sweep's kernel definitions: give them this process's import path.
    import_path = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
    sim_env = {"KERNELSWEEP_SIM_STATE": str(Path(state_dir).resolve()), "PYTHONPATH": import_path, **(env or {})}
    return Toolchain(kind="sim", commands=commands, env=sim_env)


def resolve_toolchain(
    kind: str, sim_state_dir: str | Path, extra_paths: Sequence[str | Path] = ()
) -> tuple[Toolchain, str | None]:
    """Pick the toolchain; returns it and a one-line notice when `auto` fell back to the sim."""
    if kind == "sim":
        return sim_toolchain(sim_state_dir), None
    tools = find_neuron_tools(extra_paths=extra_paths)
    if kind == "neuron":
        if not neuron_available(tools):
            missing = [t for t in ("neuronx-cc", "neuron-explorer or neuron-profile") if not _has(tools, t)]
            what = f"missing {', '.join(missing)}" if missing else "no /dev/neuron* device"
            raise UsageError(
                f"--toolchain neuron: {what}; run on a Neuron instance with the SDK "
                "(kernelsweep doctor shows details) or use --toolchain sim"
            )
        return Toolchain(kind="neuron", commands=tools), None
    if kind != "auto":
        raise UsageError(f"unknown toolchain {kind!r}; use auto, neuron or sim")
    if neuron_available(tools):
        return Toolchain(kind="neuron", commands=tools), None
    notice = "No Neuron SDK or device found: running on the simulated toolchain (every row is marked simulated)."
    return sim_toolchain(sim_state_dir), notice


def _has(tools: Mapping[str, tuple[str, ...]], requirement: str) -> bool:
    return any(name in tools for name in requirement.split(" or "))
