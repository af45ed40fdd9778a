"""Where the real Neuron tools are, and the `Toolchain` value every adapter is handed.

The adapters only ever see a `Toolchain`: a command prefix per tool, extra environment, the tracers
it offers, the Python they trace under and any versions fixed by construction. For the real SDK the
prefix is the executable's path; the simulator builds its own (`kernelsweep.sim.toolchain`), so the
adapters' argv, parsing and error handling are the same code either way. Choosing between the two is the caller's job
(`kernelsweep.this_host.context.resolve_toolchain`); nothing here knows the simulator exists.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kernelsweep.errors import ToolNotFoundError

if TYPE_CHECKING:
    from kernelsweep.toolchain.tracing.interpreter import NeuronPython
    from kernelsweep.toolchain.tracing.request import Tracer

NEURON_BIN_DIR = Path("/opt/aws/neuron/bin")
TOOLS = ("neuronx-cc", "neuron-profile", "neuron-explorer", "neuron-ls")


@dataclass(frozen=True)
class Toolchain:
    kind: str  # "neuron", "sim", or "cpu" (the real SDK traces and compiles; the simulator captures)
    commands: Mapping[str, tuple[str, ...]]
    env: Mapping[str, str] = field(default_factory=dict)
    tracers: tuple[Tracer, ...] = ()  # tried in order; the first whose API imports traces
    # Versions known without asking the host ("runtime", "nki", "instance_type"); the rest are probed.
    fixed_versions: Mapping[str, str | None] = field(default_factory=dict)
    neuron_python: NeuronPython | None = None  # the trace worker's interpreter; None: kernelsweep's own
    # The runtime's benchmark API (kernelsweep.toolchain.iterations): the Python that has it and the module it
    # imports; None: none on this host (KERNELSWEEP_NRTPY_PYTHON unset)
    benchmark_python: str | None = None
    benchmark_module: str = "nrtpy"

    @property
    def is_simulation(self) -> bool:
        """Whether the numbers are modelled: fully (sim), or the timing and capture only (cpu)."""
        return self.kind in ("sim", "cpu")

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
    found: dict[str, tuple[str, ...]] = {}
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


def missing_for_neuron(tools: Mapping[str, tuple[str, ...]]) -> str:
    """What keeps `--toolchain neuron` from running here, in a few words."""
    missing = [t for t in ("neuronx-cc", "neuron-explorer or neuron-profile") if not _has(tools, t)]
    return f"missing {', '.join(missing)}" if missing else "no /dev/neuron* device"


def _has(tools: Mapping[str, tuple[str, ...]], requirement: str) -> bool:
    return any(name in tools for name in requirement.split(" or "))
