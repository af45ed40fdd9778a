"""The compile farm: NEFFs built on CPU-only hosts, so Neuron hosts spend their hours capturing.

Tracing and neuronx-cc need no Neuron device, and a NEFF is content-addressed in the artifact store
under a key of everything that decides it (kernelsweep.stores.cache: kernel source, shape, dtype, target,
LNC, tool versions). So a compile host (a worker in the `kernelsweep-compile` pool) traces and
compiles a shard's points for their family's target and leaves IR and NEFF in the store, each cache
entry naming the host that compiled it; the family's capture shard then finds every NEFF there and
only captures (a miss compiles locally as before, so a fleet without compile hosts still works), and
each row's `neff_compile_host` says where its NEFF came from.

The key holds the compiler and NKI versions, so a compile host with another SDK than the family's
capture hosts would fill the store with NEFFs nobody reads, and the Neuron hosts would compile after
all: a compile shard refuses, in one line, when its SDK differs from the one the family's hosts last
reported (`sdk_mismatch`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping

from kernelsweep.errors import UsageError
from kernelsweep.fleet.hosts import HostReport
from kernelsweep.fleet.plan import pool_name
from kernelsweep.stores.artifacts import open_artifact_store
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.this_host.context import (
    Locations,
    StageContext,
    default_compile_slots,
    neuron_python,
    resolve_toolchain,
    sdk_tools,
)
from kernelsweep.this_host.family import HostPlatform
from kernelsweep.this_host.scratch import scratch
from kernelsweep.toolchain.compile_cost import CompilePeaks
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.tracing.tracers import TRACERS
from kernelsweep.toolchain.versions import collect

COMPILE_POOL = pool_name("compile")
COMPILE_FLOW = "compile-shard"
COMPILE_DEPLOYMENT = f"{COMPILE_FLOW}/compile"
SDK_NAMES = ("compiler", "nki")  # the versions in a NEFF's cache key that a compile host must share


def compile_toolchain(spec: SweepSpec, locations: Locations, env: Mapping[str, str] | None = None) -> Toolchain:
    """The toolchain a compile host traces and compiles with: the one the family's capture hosts
    resolve to, minus the device. `neuron` (and `auto` where neuronx-cc is installed) needs only
    the compiler; `auto` without one is the simulator, as on a capture host; `sim` and `cpu` as ever.
    `env`, the SDK build a compile run carries (a bisection step's), is set for the tools over their
    own: in the toolchain, not in this host's environment, which the shard's other compiles share."""
    toolchain = _host_toolchain(spec, locations)
    return dataclasses.replace(toolchain, env={**toolchain.env, **env}) if env else toolchain


def _host_toolchain(spec: SweepSpec, locations: Locations) -> Toolchain:
    if spec.toolchain in ("sim", "cpu"):
        python = neuron_python(spec.neuron_python, locations) if spec.toolchain == "cpu" else None
        return resolve_toolchain(spec.toolchain, locations.sim_state_dir, locations.tool_paths, python)[0]
    python = neuron_python(spec.neuron_python, locations)
    tools = sdk_tools(locations.tool_paths, python)
    if "neuronx-cc" in tools:
        return Toolchain(kind="neuron", commands=tools, tracers=TRACERS, neuron_python=python)
    if spec.toolchain == "neuron":
        raise UsageError(
            "--toolchain neuron: this compile host has no neuronx-cc; install the Neuron SDK's compiler "
            "(no device is needed) or take the host out of the kernelsweep-compile pool"
        )
    return resolve_toolchain("sim", locations.sim_state_dir)[0]


def prepare_compile(
    spec: SweepSpec, locations: Locations, stop: threading.Event | None = None, env: Mapping[str, str] | None = None
) -> StageContext:
    """A stage context that can trace and compile but leases no NeuronCore: a compile host has none;
    `env` the SDK build to compile as (compile_toolchain)."""
    toolchain = compile_toolchain(spec, locations, env)
    with scratch("probe") as probe_dir:
        versions = collect(toolchain, probe_dir)
    peaks = CompilePeaks(locations.sim_state_dir / "leases" if toolchain.is_simulation else locations.lock_dir)
    limit = spec.execution.compile_memory_limit_gb
    return StageContext(
        toolchain=toolchain,
        store=open_artifact_store(spec.artifacts_location),
        capture=spec.capture,
        leasers={},
        compile_slots=spec.execution.compile_slots or default_compile_slots(peaks.peak(versions.compiler)),
        versions=versions,
        host=HostPlatform(None, "compile host"),
        stop=stop or threading.Event(),
        compile_memory_limit_bytes=int(limit * 2**30) if limit else None,
        compile_peaks=peaks,
        host_name=locations.host_name,
    )


def family_sdks(reports: Iterable[HostReport]) -> dict[str, dict[str, str | None]]:
    """family -> the SDK versions (SDK_NAMES) its newest report gave; `reports` newest first."""
    found: dict[str, dict[str, str | None]] = {}
    for report in reports:
        if report.family is not None and report.family not in found:
            found[report.family] = {name: report.versions.get(name) for name in SDK_NAMES}
    return found


def sdk_mismatch(
    host: str, family: str, have: Mapping[str, str | None], expected: Mapping[str, str | None] | None
) -> str | None:
    """One line when this compile host's SDK is not the family's (None: no family host has reported
    yet, so there is nothing to hold it to; its capture hosts then find the NEFFs or compile)."""
    if not expected:
        return None
    differ = [n for n in SDK_NAMES if expected.get(n) is not None and have.get(n) != expected.get(n)]
    if not differ:
        return None
    parts = ", ".join(f"{n} {have.get(n) or 'unknown'} (the {family} hosts run {expected[n]})" for n in differ)
    return (
        f"compile host {host} has {parts}: a NEFF it built would be another measurement, so it refuses this "
        f"shard; install the {family} hosts' SDK on it"
    )
