"""The simulated toolchain as the adapters see it: each tool is this Python running a stand-in module.

The simulator is never put on the user's PATH; the adapters build the same argv, parse the same
output and classify the same failures as with the real tools. `cpu_toolchain` is the real SDK's
tracers and compiler with the simulator's device: a real trace and compile, a modelled capture.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kernelsweep.sim import RUNTIME_VERSION
from kernelsweep.sim.config import sim_env
from kernelsweep.sim.noise import new_session
from kernelsweep.sim.template import LEAN_ENV, template_env
from kernelsweep.sim.tracer import SIM_TRACERS
from kernelsweep.toolchain.prefork_client import TEMPLATE_ENV, forked_argv
from kernelsweep.toolchain.resolve import Toolchain

if TYPE_CHECKING:
    from kernelsweep.toolchain.tracing import Tracer
    from kernelsweep.toolchain.tracing.interpreter import NeuronPython

SIMULATED_INSTANCE = "simulated"
NRTPY_MODULE = "kernelsweep.sim.nrtpy"  # the stand-in for the runtime's Python benchmark API
_MODULES = {
    "neuronx-cc": "kernelsweep.sim.neuronx_cc",
    "neuron-profile": "kernelsweep.sim.neuron_profile",
    "neuron-explorer": "kernelsweep.sim.neuron_explorer",
    "neuron-ls": "kernelsweep.sim.neuron_ls",
}


def sim_toolchain(state_dir: str | Path, env: Mapping[str, str] | None = None) -> Toolchain:
    # The stand-ins import the sweep's kernel definitions: they append this process's import path to
    # their own (never in front of it, as PYTHONPATH would).
    import_path = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
    tool_env = {
        # a new session: a new run of the simulated device, with its own shift
        **sim_env(state_dir=Path(state_dir).resolve(), session=new_session(Path(state_dir)), import_path=import_path),
        **LEAN_ENV,
        **template_env(),
        **(env or {}),
    }
    # Forked from this process's template, else -P: the tool's working folder is not put first on its
    # path, so nothing there shadows a module.
    commands = {
        tool: tuple(forked_argv(tool_env, sys.executable, module) or (sys.executable, "-P", "-m", module))
        for tool, module in _MODULES.items()
    }
    return Toolchain(
        kind="sim",
        commands=commands,
        env=tool_env,
        tracers=SIM_TRACERS,
        fixed_versions={"runtime": RUNTIME_VERSION, "instance_type": SIMULATED_INSTANCE},
        benchmark_python=sys.executable,
        benchmark_module=NRTPY_MODULE,
    )


def cpu_toolchain(
    state_dir: str | Path,
    real_tools: Mapping[str, tuple[str, ...]],
    tracers: tuple[Tracer, ...],
    python: NeuronPython | None,
) -> Toolchain:
    """`--toolchain cpu`: the real SDK's tracers (which compile) under its interpreter, its
    `neuronx-cc` when present, and the simulator's runtime, profiler and device for the capture."""
    sim = sim_toolchain(state_dir)
    commands = {k: v for k, v in sim.commands.items() if k != "neuronx-cc"}  # the compile is the SDK's
    commands |= {k: v for k, v in real_tools.items() if k == "neuronx-cc"}
    # never limit the real compiler's threads; no template: the SDK's tracers are imported afresh (its
    # stand-in tools' command then runs them as `python -P -m`)
    env = {k: v for k, v in sim.env.items() if k not in LEAN_ENV and k != TEMPLATE_ENV}
    return Toolchain(
        kind="cpu",
        commands=commands,
        env=env,
        tracers=tracers,
        fixed_versions=dict(sim.fixed_versions),
        neuron_python=python,
        benchmark_python=sim.benchmark_python,
        benchmark_module=sim.benchmark_module,
    )
