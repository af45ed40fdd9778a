"""Set up what every stage of a flow run shares: toolchain, artifact store, core leases."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.artifacts import open_artifact_store
from kernelsweep.locks import CoreLeaser
from kernelsweep.platforms import PLATFORMS
from kernelsweep.spec import SweepSpec
from kernelsweep.stages import StageContext
from kernelsweep.toolchain.devices import list_devices
from kernelsweep.toolchain.resolve import resolve_toolchain
from kernelsweep.toolchain.versions import collect


@dataclass(frozen=True)
class Locations:
    """Host-local folders; taken from the environment by the flow layer, never read here."""

    sim_state_dir: Path
    lock_dir: Path
    tool_paths: tuple[Path, ...] = ()  # searched before PATH and /opt/aws/neuron/bin


COMPILE_MEMORY_BYTES = 4 * 2**30  # a large NEFF compile can hold several GB


def default_compile_slots() -> int:
    """One compile per core, fewer when memory would run out first."""
    cores = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cores, memory // COMPILE_MEMORY_BYTES))


def _default_lnc(instance_type: str | None) -> int:
    """What an older neuron-ls that omits `logical_neuroncore_config` runs at: trn2 defaults to LNC=2."""
    family = (instance_type or "").split(".")[0]
    return PLATFORMS[family].default_lnc if family in PLATFORMS else 1


def prepare(spec: SweepSpec, locations: Locations) -> tuple[StageContext, str | None]:
    """Returns the context and the toolchain notice (set when `auto` fell back to the sim)."""
    toolchain, notice = resolve_toolchain(spec.toolchain, locations.sim_state_dir, extra_paths=locations.tool_paths)
    versions = collect(toolchain)
    devices = list_devices(toolchain, default_lnc=_default_lnc(versions.instance_type))
    lock_dir = locations.sim_state_dir / "leases" if toolchain.is_simulation else locations.lock_dir
    ctx = StageContext(
        toolchain=toolchain,
        store=open_artifact_store(spec.artifacts),
        capture=spec.capture,
        leaser=CoreLeaser(lock_dir, devices.logical_cores, lnc=devices.lnc),
        compile_slots=spec.execution.compile_slots or default_compile_slots(),
        versions=versions,
    )
    return ctx, notice
