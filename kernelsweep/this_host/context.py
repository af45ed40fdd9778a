"""What every stage of a flow run shares, and how it is set up: the toolchain, the artifact store,
the capture settings, the NeuronCore leases, the compile slots and the tool versions.

Set-up happens once per flow run (`prepare`); the stages only read the resulting `StageContext`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelsweep.errors import CaptureError, UsageError
from kernelsweep.locks import CoreLeaser
from kernelsweep.platforms import PLATFORMS, support_notice
from kernelsweep.sim.toolchain import cpu_toolchain, sim_toolchain
from kernelsweep.stores.artifacts import ArtifactStore, open_artifact_store
from kernelsweep.sweepspec.models import CaptureSettings, SweepSpec
from kernelsweep.this_host import scratch
from kernelsweep.this_host.family import HostPlatform, host_platform
from kernelsweep.toolchain.compile_cost import CompilePeaks, default_slots
from kernelsweep.toolchain.devices import list_devices
from kernelsweep.toolchain.packages import SDK_PACKAGES, package_version
from kernelsweep.toolchain.process import Slots
from kernelsweep.toolchain.resolve import Toolchain, find_neuron_tools, missing_for_neuron, neuron_available
from kernelsweep.toolchain.tracing import TracerChoice
from kernelsweep.toolchain.tracing.interpreter import NeuronPython, choose_neuron_python
from kernelsweep.toolchain.tracing.tracers import TRACERS
from kernelsweep.toolchain.versions import ToolVersions, collect

# How long a capture waits for a NeuronCore before its point fails: far beyond any wait on the
# sweep's own captures, short enough that a wedged holder costs a failed row, not a night.
DEFAULT_LEASE_TIMEOUT_SECONDS = 3600.0
SIM_NOTICE = "No Neuron SDK or device found: running on the simulated toolchain (every row is marked simulated)."


@dataclass(frozen=True)
class Locations:
    """Host-local folders and limits; taken from the environment by the flow layer, never read here."""

    sim_state_dir: Path
    lock_dir: Path
    tool_paths: tuple[Path, ...] = ()  # searched before PATH and /opt/aws/neuron/bin
    lease_timeout_seconds: float = DEFAULT_LEASE_TIMEOUT_SECONDS
    neuron_python: str | None = None  # KERNELSWEEP_NEURON_PYTHON: the SDK's interpreter on this host
    host_name: str | None = None  # this host's name as the fleet knows it (its worker's), for NEFF provenance


@dataclass(frozen=True)
class StageContext:
    """Everything a stage needs besides the point; built once per flow run."""

    toolchain: Toolchain
    store: ArtifactStore
    capture: CaptureSettings
    leasers: Mapping[int, CoreLeaser]  # by LNC: one logical id means different physical cores at each
    compile_slots: int
    versions: ToolVersions
    host: HostPlatform = HostPlatform(None, "not set")
    stop: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)  # set: wind down
    compile_limiter: Slots = field(init=False, repr=False, compare=False)  # at most compile_slots compiles at once
    # which tracer the run's points start with; one that proves unusable is skipped from then on
    tracer_choice: TracerChoice = field(init=False, repr=False, compare=False)
    compile_memory_limit_bytes: int | None = None  # each compile's RLIMIT_AS (kernelsweep.toolchain.compile_cost)
    compile_peaks: CompilePeaks | None = None  # where measured compile peaks are kept for the slot default
    host_name: str | None = None  # recorded with every NEFF this host compiles (the cache entry's `host`)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compile_limiter", Slots(self.compile_slots))
        object.__setattr__(self, "tracer_choice", TracerChoice(self.versions.tracer))

    @property
    def capture_slots(self) -> int:
        """How many captures can run at once: one per leasable NeuronCore (at the finest LNC)."""
        return max((len(leaser.logical_cores) for leaser in self.leasers.values()), default=0)

    def leaser_for(self, lnc: int) -> CoreLeaser:
        try:
            return self.leasers[lnc]
        except KeyError:
            raise CaptureError(
                f"this host has no free NeuronCores to lease at LNC={lnc} (leases exist for LNC "
                f"{', '.join(map(str, sorted(self.leasers))) or 'none'}; see the run's notices)",
                error_class="NoNeuronCores",
            ) from None


def host_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def default_compile_slots(peak_bytes: int | None = None) -> int:
    """One compile per core, fewer when memory would run out first: by the largest compile peak
    measured on this host for the compiler (kernelsweep.toolchain.compile_cost), else a guess."""
    return default_slots(len(os.sched_getaffinity(0)), host_memory_bytes(), peak_bytes)


def neuron_python(spec_value: str | None, locations: Locations) -> NeuronPython:
    """The Neuron SDK's interpreter: the spec's, else KERNELSWEEP_NEURON_PYTHON, else kernelsweep's own
    when it has the SDK, else a Deep Learning AMI venv that has it (tracing.interpreter)."""
    own_has_sdk = any(package_version(name).usable for name in SDK_PACKAGES)
    return choose_neuron_python(spec_value or None, locations.neuron_python, own_has_sdk=own_has_sdk)


NO_CORES = (
    "this host has no NeuronCore (neuron-ls lists none): run on a Neuron instance, or use --toolchain cpu "
    "to trace and compile with the SDK here and capture on the simulator (kernelsweep doctor shows details)"
)


def check_named_pythons(spec: SweepSpec) -> None:
    """Each `[toolchains]` entry names an executable file: found before any work, naming the entry as
    the spec writes it (the run would otherwise fail at its first point, after its journal began)."""
    for named in spec.toolchains:
        if not (os.path.isfile(named.python) and os.access(named.python, os.X_OK)):
            raise UsageError(
                f"[toolchains] {named.name!r} = {named.python!r} is not an executable file; give the python of "
                "that Neuron SDK environment (e.g. /opt/aws_neuronx_venv_pytorch_2_9/bin/python)"
            )


def resolve_toolchain(
    kind: str, sim_state_dir: str | Path, extra_paths: tuple[Path, ...] = (), python: NeuronPython | None = None
) -> tuple[Toolchain, str | None]:
    """Pick the toolchain; returns it and a one-line notice when `auto` fell back to the sim. `cpu`
    traces and compiles with the real SDK and captures on the simulator (no device needed)."""
    if kind == "sim":
        return sim_toolchain(sim_state_dir), None
    if kind not in ("auto", "neuron", "cpu"):
        raise UsageError(f"unknown toolchain {kind!r}; use auto, neuron, cpu or sim")
    tools = sdk_tools(extra_paths, python)
    if kind == "cpu":
        return cpu_toolchain(sim_state_dir, tools, TRACERS, python), None
    if neuron_available(tools):
        return Toolchain(kind="neuron", commands=tools, tracers=TRACERS, neuron_python=python), None
    if kind == "neuron":
        raise UsageError(
            f"--toolchain neuron: {missing_for_neuron(tools)}; run on a Neuron instance with the SDK "
            "(kernelsweep doctor shows details), use --toolchain cpu for a real SDK without a device, "
            "or --toolchain sim"
        )
    return sim_toolchain(sim_state_dir), SIM_NOTICE


def sdk_tools(extra_paths: Sequence[Path], python: NeuronPython | None) -> dict[str, tuple[str, ...]]:
    """The real tools: in the configured paths, then beside another SDK's interpreter (its own tools sit
    there), then on PATH. Another SDK's interpreter compiles with its own neuronx-cc: one found elsewhere
    (on PATH, in the system's SDK folder) did not build its NEFFs, so it neither compiles for it nor names
    the rows' compiler; without one beside the interpreter, the rows' compiler is the neuronx-cc package
    the trace worker sees there (kernelsweep.toolchain.versions)."""
    if python is None or not python.foreign:
        return find_neuron_tools(extra_paths=extra_paths)
    own_bin = Path(os.path.abspath(python.path)).parent
    tools = find_neuron_tools(extra_paths=(*extra_paths, own_bin))
    found = tools.get("neuronx-cc")
    if found and Path(os.path.abspath(found[0])).parent != own_bin:
        return {tool: argv for tool, argv in tools.items() if tool != "neuronx-cc"}
    return tools


def _default_lnc(instance_type: str | None) -> int:
    """What an older neuron-ls that omits `logical_neuroncore_config` runs at: trn2 defaults to LNC=2."""
    family = (instance_type or "").split(".")[0]
    return PLATFORMS[family].default_lnc if family in PLATFORMS else 1


def prepare(
    spec: SweepSpec, locations: Locations, stop: threading.Event | None = None
) -> tuple[StageContext, str | None]:
    """Returns the context and the notices for the run's log, one per line: the toolchain's (when
    `auto` fell back to the sim), any devices left out because another process holds them, and any
    platform swept with a real NKI that AWS does not support there.

    `stop`, once set, ends every wait for a NeuronCore and tells the flow to start nothing new.
    """
    stop = stop or threading.Event()
    scratch.remove_orphans()  # what runs killed on this host left in the temporary folder
    python = neuron_python(spec.neuron_python, locations) if spec.toolchain != "sim" else None
    toolchain, notice = resolve_toolchain(spec.toolchain, locations.sim_state_dir, locations.tool_paths, python)
    with scratch.scratch("probe") as probe_dir:
        versions = collect(toolchain, probe_dir)
    if toolchain.kind == "cpu" and versions.tracer is None:
        raise UsageError(
            f"--toolchain cpu traces and compiles with the real Neuron SDK, but {python.path if python else 'Python'}"
            " has no usable NKI tracer; set neuron_python (or KERNELSWEEP_NEURON_PYTHON) to the python of an "
            "environment with nki and neuronx-cc (kernelsweep doctor shows details)"
        )
    lock_dir = locations.sim_state_dir / "leases" if toolchain.is_simulation else locations.lock_dir
    leasers, notices, instance = _leasers(toolchain, spec, versions.instance_type, lock_dir, locations, stop)
    peaks = CompilePeaks(lock_dir)
    limit = spec.execution.compile_memory_limit_gb
    ctx = StageContext(
        toolchain=toolchain,
        store=open_artifact_store(spec.artifacts_location),
        capture=spec.capture,
        leasers=leasers,
        compile_slots=spec.execution.compile_slots or default_compile_slots(peaks.peak(versions.compiler)),
        versions=versions,
        host=host_platform(versions.instance_type, instance, simulated=toolchain.is_simulation),
        stop=stop,
        compile_memory_limit_bytes=int(limit * 2**30) if limit else None,
        compile_peaks=peaks,
        host_name=locations.host_name,
    )
    notices += support_notices(toolchain, versions.nki, spec.platforms)
    return ctx, "\n".join(line for line in (notice, *notices) if line) or None


def support_notices(toolchain: Toolchain, nki: str | None, platforms: Sequence[str]) -> list[str]:
    """A line per platform swept with a real NKI that AWS does not support there (the simulator's
    NKI is a model, supported wherever it runs)."""
    if toolchain.is_simulation:
        return []
    return [notice for platform in platforms if (notice := support_notice(platform, nki))]


def _leasers(
    toolchain: Toolchain,
    spec: SweepSpec,
    instance_type: str | None,
    lock_dir: Path,
    locations: Locations,
    stop: threading.Event,
) -> tuple[dict[int, CoreLeaser], list[str], str | None]:
    """One `neuron-ls` and one leaser per LNC the spec's platforms run at, each listed under that
    NEURON_LOGICAL_NC_CONFIG (a DLAMI container's global value must not decide what a lease means).
    An LNC this host cannot run at (trn1 ignores the variable) gets no leaser; held devices are left out."""
    leasers: dict[int, CoreLeaser] = {}
    notices: list[str] = []
    instance = None
    listed = False
    swept = {lnc for entry in spec.kernels for lnc in entry.lnc}  # LNC as an axis: trn2 at 1 and 2
    for lnc in sorted({PLATFORMS[p].default_lnc for p in spec.platforms} | swept):
        devices = list_devices(toolchain, default_lnc=_default_lnc(instance_type), lnc=lnc)
        instance = instance or devices.instance_type
        listed = listed or bool(devices.logical_cores)
        if devices.lnc != lnc:
            continue
        held = devices.held_notice()
        if held:
            notices.append(held)
        if devices.free_cores:
            leasers[lnc] = CoreLeaser(
                lock_dir, devices.free_cores, lnc=lnc, wait_timeout_seconds=locations.lease_timeout_seconds, stop=stop
            )
    if not listed:
        raise UsageError(NO_CORES)
    return leasers, notices, instance


def check_cores(toolchain: Toolchain) -> None:
    """A host that captures has a NeuronCore: without one every point would be traced and compiled,
    then fail at its capture. UsageError before any work."""
    if not list_devices(toolchain).logical_cores:
        raise UsageError(NO_CORES)
