"""The simulator's knobs: every `KERNELSWEEP_SIM_*` variable, declared once in `KNOBS` (its type,
default and meaning) and read once, into the frozen `SimConfig` the stand-in tools run on.

The adapters pass these variables to the stand-in tools, so the tools read them (`SimConfig.from_env`);
the CLI reads them too, before any work, so a bad value is one line naming the variable (exit 2)
rather than a failed tool later. Whoever starts a simulated host or toolchain builds its variables
with `sim_env(...)`, from the same declarations. docs/simulator.md lists them (`tests/test_sim_settings.py`
holds it to `KNOBS`). The faults' grammar is sim.faults', the tools generations sim.tools'.

Not pydantic: the stand-in tools are short processes started thousands of times a sweep, and
importing pydantic would triple what each one costs to start (0.04 -> 0.13 CPU-s measured).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelsweep.importpath import append_last_resort
from kernelsweep.sim import COMPILER_VERSION, SIM_VERSION_SUFFIX
from kernelsweep.sim.culprit_build import CulpritBuild, parse_culprit
from kernelsweep.sim.faults import FAULTS_ENV, Faults, parse_faults
from kernelsweep.sim.slowdowns import SLOWDOWN_ENV, Slowdown, parse_slowdowns
from kernelsweep.sim.tools import DEFAULT_RELEASE, TOOLS_ENV, ToolsRelease, release

PREFIX = "KERNELSWEEP_SIM_"
STATE_ENV = PREFIX + "STATE"
IMPORT_PATH_ENV = PREFIX + "IMPORT_PATH"
NKI_ENV = PREFIX + "NKI"
SESSION_ENV = PREFIX + "SESSION"
CURRENT_NKI = "0.7"  # the newest generation sim.nki.generations knows
_SIZE_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30}
DEFAULT_RUN_NOISE = 0.01  # docs/reports.md, "Run-level noise": why 1%
DEFAULT_HOST_NOISE = 0.005
DEFAULT_SHARED_NOISE = 0.005  # half the per-point shift: real runs move together too (docs/reports.md)
DEFAULT_HOST = "sim-host"


@dataclass(frozen=True)
class SimConfig:
    """The simulated host and tools, as the knobs set them (each field is one `KNOBS` entry)."""

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
    import_path: tuple[str, ...] = ()
    culprit_build: CulpritBuild | None = None

    def slowdown(self, kernel: str, params: dict[str, int]) -> float:
        """What the code this compiler emits for the point runs at: its own slowdown, and the culprit
        build's when this build is it or a later one."""
        own = next((s.factor for s in self.slowdowns if s.matches(kernel, params)), 1.0)
        culprit = self.culprit_build.factor(self.compiler_version, kernel, params) if self.culprit_build else 1.0
        return own * culprit

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
        """The knobs as this process's environment sets them; a bad value is a ValueError naming its
        variable (the CLI makes it one line, exit 2, before any work)."""
        return cls(**{knob.field: knob.parse(knob.env, os.environ.get(knob.env)) for knob in KNOBS})


def extend_import_path(config: SimConfig) -> None:
    """Make the sweep's kernel modules importable, as a last resort: never in place of an installed
    module (`kernelsweep.importpath`)."""
    append_last_resort(config.import_path)


def setting(env: str) -> Any:
    """One knob's value, for a tool that needs it before the rest (`neuron-profile`'s parser: the tools
    generation decides its subcommands)."""
    return _BY_ENV[env].parse(env, os.environ.get(env))


def configured(env: str) -> str | None:
    """A knob's text as set, None when unset: for the caller that must tell unset from its default
    (the CLI makes the state folder only when `KERNELSWEEP_SIM_STATE` is unset)."""
    return os.environ.get(_BY_ENV[env].env) or None


def sim_env(**values: str | int | float | bool | Path) -> dict[str, str]:
    """The variables that set these `SimConfig` fields (`sim_env(platform="trn2", time_scale=3)`), for a
    simulated host's or tool's environment; a field that is no knob, or a bad value, is a ValueError."""
    env = {}
    for name, value in values.items():
        knob = _BY_FIELD.get(name)
        if knob is None:
            raise ValueError(f"{name}: no simulator setting; use one of {', '.join(_BY_FIELD)}")
        text = _text_of(value)
        knob.parse(knob.env, text)
        env[knob.env] = text
    return env


def _text_of(value: str | int | float | bool | Path) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# Readers: (variable, its text or None when unset) -> the field's value, or a ValueError naming the variable


def _or(default: Any) -> Callable[[str, str | None], Any]:
    return lambda env, text: text or default


def _number(kind: type[int] | type[float], minimum: float, default: float) -> Callable[[str, str | None], Any]:
    def read(env: str, text: str | None) -> Any:
        if text is None:
            return kind(default)
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not minimum <= value < math.inf:
            article = "an" if kind is int else "a"
            raise ValueError(f"{env}={text!r}: give {article} {kind.__name__} of at least {minimum:g}")
        return value

    return read


def _size(env: str, text: str | None) -> int:
    """Bytes, or a count with a K, M or G suffix (binary units)."""
    text = "0" if text is None else text.strip().upper()
    factor = _SIZE_SUFFIXES.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in _SIZE_SUFFIXES else text
    try:
        if digits and float(digits) >= 0:
            return int(float(digits) * factor)
    except ValueError:
        pass
    raise ValueError(f"{env}={text!r}: give a number of bytes, or one with a K, M or G suffix (2G)")


def _state_dir(env: str, text: str | None) -> Path:
    if text:
        return Path(text)
    import tempfile  # deferred: the adapters always set the state dir, and every tool call would pay for it

    return Path(tempfile.gettempdir()) / "kernelsweep-sim"


def _compiler_version(env: str, text: str | None) -> str:
    """A configured version still says it is simulated. It names cache entries and is stamped into
    NEFFs: one that is not a version (a line break, 300 characters) is a ValueError before any work,
    not a failed row at every point."""
    if not text:
        return COMPILER_VERSION
    if not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z._+-]{0,63}", text):
        raise ValueError(
            f"{env}={text[:80]!r}: give a version such as 2.21.33363.0 (letters, digits, '.', '_', '+', '-'; "
            "at most 64)"
        )
    return text.removesuffix(SIM_VERSION_SUFFIX) + SIM_VERSION_SUFFIX


@dataclass(frozen=True)
class Knob:
    """One simulator setting: its variable, the `SimConfig` field it sets, and what docs/simulator.md
    says of it (type and default as written there, and a one-line meaning)."""

    env: str
    field: str
    kind: str
    default: str
    meaning: str
    parse: Callable[[str, str | None], Any]


KNOBS = (
    Knob(STATE_ENV, "state_dir", "folder", "<temp>/kernelsweep-sim",
         "simulated device state: core locks, fault counters, sessions, noise draws", _state_dir),
    Knob(PREFIX + "PLATFORM", "platform", "family", "every family",
         "the one platform family the simulated host is: trn1, trn2 or inf2", _or(None)),
    Knob(PREFIX + "UNNAMED", "unnamed", "flag", "0",
         "1 or true: neuron-ls names no instance type (older neuron-ls, a host off EC2)",
         lambda env, text: text in ("1", "true")),
    Knob(PREFIX + "CORES", "cores", "int >= 0", "2",
         "logical NeuronCores the device shows at its own LNC; 0: no Neuron device (a compile host)",
         _number(int, 0, 2)),
    Knob(PREFIX + "LNC", "lnc", "int >= 1", "2",
         "the device's logical core config (trn2's; trn1 and inf2 have LNC 1 only)", _number(int, 1, 2)),
    Knob(NKI_ENV, "nki", "generation", CURRENT_NKI,
         "the NKI generation the stand-in tracer emulates: 0.1 ... 0.7, or legacy", _or(CURRENT_NKI)),
    Knob(PREFIX + "TIME_SCALE", "time_scale", "float >= 0", "0",
         "tool latencies emulated: seconds slept = modelled seconds x scale", _number(float, 0, 0)),
    Knob(IMPORT_PATH_ENV, "import_path", "folders", "none",
         "folders appended to the stand-ins' import path (the sweep's, for its kernels); set by the toolchain",
         lambda env, text: tuple(filter(None, (text or "").split(os.pathsep)))),
    Knob(FAULTS_ENV, "faults", "faults", "none",
         "injected faults, `name=value` separated by commas (sim.faults)", lambda env, text: parse_faults(text or "")),
    Knob(TOOLS_ENV, "tools", "release", DEFAULT_RELEASE,
         "the aws-neuronx-tools generation the stand-in profiler and neuron-ls speak (sim.tools)",
         lambda env, text: release(text)),
    Knob(PREFIX + "COMPILER_VERSION", "compiler_version", "version", COMPILER_VERSION.removesuffix(SIM_VERSION_SUFFIX),
         "the version the simulated compiler reports and stamps into its NEFFs (+kernelsweep.sim appended)",
         _compiler_version),
    Knob(SLOWDOWN_ENV, "slowdowns", "slowdowns", "none",
         "code this compiler emits runs slower: `KERNEL[/AXIS=VALUE...]:FACTOR` separated by `;`",
         lambda env, text: parse_slowdowns(text or "")),
    Knob(PREFIX + "CULPRIT_BUILD", "culprit_build", "culprit", "none",
         "from this compiler version on, a kernel's code runs slower: `VERSION@KERNEL[/AXIS=VALUE...]:FACTOR`",
         lambda env, text: parse_culprit(env, text)),
    Knob(PREFIX + "NOISE_SEED", "noise_seed", "text", "fresh noise",
         "repeatable noise: the k-th capture of a NEFF and the k-th session draw the same", _or(None)),
    Knob(PREFIX + "RUN_NOISE", "run_noise", "float >= 0", f"{DEFAULT_RUN_NOISE:g}",
         "standard deviation of a point's shift for a whole run, as a fraction (0: off)",
         _number(float, 0, DEFAULT_RUN_NOISE)),
    Knob(PREFIX + "HOST_NOISE", "host_noise", "float >= 0", f"{DEFAULT_HOST_NOISE:g}",
         "standard deviation of a host's own lasting shift, shared by its points (0: off)",
         _number(float, 0, DEFAULT_HOST_NOISE)),
    Knob(PREFIX + "SHARED_NOISE", "shared_noise", "float >= 0", f"{DEFAULT_SHARED_NOISE:g}",
         "standard deviation of a run's shift shared by every point of it (0: off)",
         _number(float, 0, DEFAULT_SHARED_NOISE)),
    Knob(PREFIX + "HOST", "host", "text", DEFAULT_HOST, "the simulated host's name (its lasting shift)",
         _or(DEFAULT_HOST)),
    Knob(PREFIX + "COMPILE_MEMORY", "compile_memory_bytes", "size", "0",
         "memory the simulated compiler holds while it compiles: bytes, or with K, M or G (2G)", _size),
    Knob(SESSION_ENV, "session", "text", "none",
         "the session (one flow run) a capture belongs to; set by the simulated toolchain, never by hand",
         _or("")),
)  # fmt: skip
_BY_ENV = {knob.env: knob for knob in KNOBS}
_BY_FIELD = {knob.field: knob for knob in KNOBS}
