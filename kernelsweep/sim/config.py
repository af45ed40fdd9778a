"""Simulator settings, read from the environment the adapters pass to the stand-in tools.

KERNELSWEEP_SIM_STATE       folder for simulated device state (core locks, fault counters)
KERNELSWEEP_SIM_PLATFORM    the one platform family the simulated host is (trn1, trn2, inf2); unset: every
                            family, so one machine can run a whole mixed-platform sweep
KERNELSWEEP_SIM_UNNAMED     1: neuron-ls names no instance type (releases before 2.34 mostly do not, and a
                            host off EC2 has no DMI name): the host still is KERNELSWEEP_SIM_PLATFORM to
                            the runtime, but kernelsweep cannot tell which family it is
KERNELSWEEP_SIM_CORES       logical NeuronCores the simulated device shows at its own LNC (default 2); 0: the
                            host has no Neuron device (a compile farm's host: it traces and compiles only)
KERNELSWEEP_SIM_LNC         the device's logical core config (default 2, as a trn2's): it has CORES x LNC
                            physical cores, and neuron-ls / the runtime regroup them under the caller's
                            NEURON_LOGICAL_NC_CONFIG; a host told it is trn1 or inf2 has LNC 1 only
KERNELSWEEP_SIM_NKI         the NKI generation the simulated tracer emulates: 0.1 ... 0.7 (default) or
                            legacy (neuronxcc.nki, traced to penguin.py for `neuronx-cc compile`)
KERNELSWEEP_SIM_TIME_SCALE  emulate tool latencies: seconds slept = modelled seconds x scale (default 0)
KERNELSWEEP_SIM_IMPORT_PATH folders appended to the stand-in's import path (the sweep's, for kernels)
KERNELSWEEP_SIM_FAULTS      injected faults, e.g. `capture-busy=2,compile-error=mlp` (see sim.faults):
                              capture-busy=N     first N captures: the NRT busy error (transient)
                              capture-timeout=N  first N captures hang until the caller's timeout
                              compile-error=K    compiles of kernel K: an NCC diagnostic (deterministic)
                              compile-error-lnc2=K  compiles of kernel K at LNC=2 only: NCC_IXLV002
                              alloc-fallback=K   compiles of kernel K: NKI's allocator falls back
                              dge-timeout=N      first N captures with --enable-dge-notifs: NRT_TIMEOUT
KERNELSWEEP_SIM_TOOLS       the aws-neuronx-tools generation the stand-in profiler and neuron-ls speak: 2.31
                            (default: profile schema 7.4.0), 2.33 (schema 12.0.1) or 2.34 (no full JSON, no
                            `neuron-ls -j`); see sim.tools
KERNELSWEEP_SIM_COMPILER_VERSION  the version the simulated compiler reports and stamps into every NEFF it
                            builds (default 2.21.33363.0; `+kernelsweep.sim` is always appended), to play a
                            compiler upgrade: the compile cache keys on it, so the new version recompiles
KERNELSWEEP_SIM_COMPILER_SLOWDOWN  code this compiler emits runs slower, as a compiler regression would:
                            `KERNEL[/AXIS=VALUE...]:FACTOR` entries separated by `;`, e.g.
                            `vector_add/n=8192:1.2` (vector_add at n=8192 takes 1.2x as long); the first
                            matching entry applies. The NEFF records the factor and the profiler's model
                            applies it whenever that NEFF runs, so NEFFs built before keep their speed
KERNELSWEEP_SIM_NOISE_SEED  make the noise repeatable: the k-th capture of a NEFF in this state dir draws the
                            same per-repeat noise, and the k-th session the same run shift, for the same
                            seed (unset: fresh noise every capture and every session)
KERNELSWEEP_SIM_RUN_NOISE   standard deviation of the shift a point takes for a whole run (a session of the
                            simulated device: one flow run), as a fraction (default 0.01, docs/reports.md
                            says why; 0 turns it off); every repeat of the point in that run shares it
KERNELSWEEP_SIM_SHARED_NOISE  standard deviation of the shift a whole run takes, shared by every point of it
                            (another host of the type, a driver, thermals: default 0.005; 0 turns it off)
KERNELSWEEP_SIM_HOST_NOISE  standard deviation of a simulated host's own lasting shift, shared by every point
                            it runs (default 0.005); the host is KERNELSWEEP_SIM_HOST (default `sim-host`)
KERNELSWEEP_SIM_COMPILE_MEMORY  memory the simulated compiler allocates and touches while it compiles (bytes, or
                            with a K, M or G suffix: `2G`; default 0): a runaway compile, for the compile
                            memory cap (execution.compile_memory_limit_gb) and the measured compile peaks
KERNELSWEEP_SIM_SESSION     the session a capture belongs to; set by the simulated toolchain each time it is
                            set up (once per flow run), never by hand
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelsweep.importpath import append_last_resort
from kernelsweep.sim import COMPILER_VERSION, SIM_VERSION_SUFFIX
from kernelsweep.sim.faults import FAULTS_ENV, Faults, parse_faults
from kernelsweep.sim.tools import TOOLS_ENV, ToolsRelease, release

IMPORT_PATH_ENV = "KERNELSWEEP_SIM_IMPORT_PATH"
NKI_ENV = "KERNELSWEEP_SIM_NKI"
CURRENT_NKI = "0.7"  # the newest generation sim.nki.generations knows
SLOWDOWN_ENV = "KERNELSWEEP_SIM_COMPILER_SLOWDOWN"
RUN_NOISE_ENV = "KERNELSWEEP_SIM_RUN_NOISE"
HOST_NOISE_ENV = "KERNELSWEEP_SIM_HOST_NOISE"
SHARED_NOISE_ENV = "KERNELSWEEP_SIM_SHARED_NOISE"
SESSION_ENV = "KERNELSWEEP_SIM_SESSION"
COMPILE_MEMORY_ENV = "KERNELSWEEP_SIM_COMPILE_MEMORY"
_SIZE_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30}
DEFAULT_RUN_NOISE = 0.01  # docs/reports.md, "Run-level noise": why 1%
DEFAULT_HOST_NOISE = 0.005
DEFAULT_SHARED_NOISE = 0.005  # half the per-point shift: real runs move together too (docs/reports.md)
DEFAULT_HOST = "sim-host"


def extend_import_path() -> None:
    """Make the sweep's kernel modules importable, as a last resort: never in place of an installed
    module (`kernelsweep.importpath`)."""
    append_last_resort(os.environ.get(IMPORT_PATH_ENV, "").split(os.pathsep))


@dataclass(frozen=True)
class Slowdown:
    kernel: str
    params: dict[str, int]
    factor: float

    def matches(self, kernel: str, params: dict[str, int]) -> bool:
        return kernel == self.kernel and all(params.get(axis) == value for axis, value in self.params.items())


def parse_slowdowns(text: str) -> tuple[Slowdown, ...]:
    found = []
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        target, _, factor = entry.rpartition(":")
        kernel, *terms = target.split("/")
        try:
            params = {axis.strip(): int(value) for axis, value in (term.split("=") for term in terms)}
            found.append(Slowdown(kernel.strip(), params, float(factor)))
        except ValueError:
            raise ValueError(f"{SLOWDOWN_ENV}: bad entry {entry!r}; use KERNEL[/AXIS=VALUE...]:FACTOR") from None
    return tuple(found)


@dataclass(frozen=True)
class SimConfig:
    state_dir: Path
    platform: str | None
    cores: int
    lnc: int
    time_scale: float
    nki: str
    faults: Faults = field(default_factory=Faults)
    compiler_version: str = COMPILER_VERSION
    slowdowns: tuple[Slowdown, ...] = ()
    noise_seed: str | None = None
    tools: ToolsRelease = field(default_factory=lambda: release(None))
    run_noise: float = DEFAULT_RUN_NOISE
    host_noise: float = DEFAULT_HOST_NOISE
    shared_noise: float = DEFAULT_SHARED_NOISE
    host: str = DEFAULT_HOST
    session: str = ""
    compile_memory_bytes: int = 0
    unnamed: bool = False  # neuron-ls names no instance type

    def slowdown(self, kernel: str, params: dict[str, int]) -> float:
        return next((s.factor for s in self.slowdowns if s.matches(kernel, params)), 1.0)

    @property
    def physical_cores(self) -> int:
        return self.cores * self.device_lnc

    @property
    def device_lnc(self) -> int:
        """trn1 and inf2 have no logical core config: one physical core is one logical core."""
        return self.lnc if self.platform in (None, "trn2") else 1

    def lnc_for(self, requested: str | None) -> int:
        """The LNC the device runs at for a caller's NEURON_LOGICAL_NC_CONFIG (ignored off trn2)."""
        if requested and self.platform in (None, "trn2") and int(requested) in (1, 2):
            return int(requested)
        return self.device_lnc

    @classmethod
    def from_env(cls) -> SimConfig:
        env = os.environ
        state = env.get("KERNELSWEEP_SIM_STATE") or _default_state_dir()
        return cls(
            state_dir=Path(state),
            platform=env.get("KERNELSWEEP_SIM_PLATFORM") or None,
            cores=_number("KERNELSWEEP_SIM_CORES", "2", int, 0),
            lnc=_number("KERNELSWEEP_SIM_LNC", "2", int, 1),
            time_scale=_number("KERNELSWEEP_SIM_TIME_SCALE", "0", float, 0),
            nki=env.get(NKI_ENV) or CURRENT_NKI,
            faults=parse_faults(env.get(FAULTS_ENV, "")),
            compiler_version=_simulated(env.get("KERNELSWEEP_SIM_COMPILER_VERSION")) or COMPILER_VERSION,
            slowdowns=parse_slowdowns(env.get(SLOWDOWN_ENV, "")),
            noise_seed=env.get("KERNELSWEEP_SIM_NOISE_SEED") or None,
            tools=release(env.get(TOOLS_ENV)),
            run_noise=_number(RUN_NOISE_ENV, str(DEFAULT_RUN_NOISE), float, 0),
            host_noise=_number(HOST_NOISE_ENV, str(DEFAULT_HOST_NOISE), float, 0),
            shared_noise=_number(SHARED_NOISE_ENV, str(DEFAULT_SHARED_NOISE), float, 0),
            host=env.get("KERNELSWEEP_SIM_HOST") or DEFAULT_HOST,
            session=env.get(SESSION_ENV, ""),
            compile_memory_bytes=_size(COMPILE_MEMORY_ENV),
            unnamed=env.get("KERNELSWEEP_SIM_UNNAMED", "") in ("1", "true"),
        )


def _default_state_dir() -> str:
    import tempfile  # deferred: the adapters always set the state dir, and every tool call would pay for it

    return os.path.join(tempfile.gettempdir(), "kernelsweep-sim")


def _size(name: str) -> int:
    """Bytes, or a count with a K, M or G suffix (binary units)."""
    text = os.environ.get(name, "0").strip().upper()
    factor = _SIZE_SUFFIXES.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in _SIZE_SUFFIXES else text
    try:
        return int(float(digits) * factor) if digits and float(digits) >= 0 else _bad_size(name, text)
    except ValueError:
        return _bad_size(name, text)


def _bad_size(name: str, text: str) -> int:
    raise ValueError(f"{name}={text!r}: give a number of bytes, or one with a K, M or G suffix (2G)")


def _simulated(version: str | None) -> str | None:
    """A configured version still says it is simulated. It names cache entries and is stamped into
    NEFFs: one that is not a version (a line break, 300 characters) is a ValueError before any work,
    not a failed row at every point."""
    if version and not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z._+-]{0,63}", version):
        raise ValueError(
            f"KERNELSWEEP_SIM_COMPILER_VERSION={version[:80]!r}: give a version such as 2.21.33363.0 "
            "(letters, digits, '.', '_', '+', '-'; at most 64)"
        )
    return version and version.removesuffix(SIM_VERSION_SUFFIX) + SIM_VERSION_SUFFIX


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
