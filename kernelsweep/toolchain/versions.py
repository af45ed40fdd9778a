"""Which compiler, profiler, runtime and NKI a result was made with.

Profiles and compile results change between SDK releases (a 3x slowdown went unnoticed until a
user reported it; profiler/runtime skew breaks profiles), so every row records these versions.
The SDK's own packages are read from their metadata (kernelsweep.toolchain.packages), in whichever
interpreter has them: the trace worker reports what it traced with.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from kernelsweep.toolchain import tracing
from kernelsweep.toolchain.compiler import compiler_version
from kernelsweep.toolchain.packages import nki_version
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.profiler import profiler_version
from kernelsweep.toolchain.resolve import Toolchain

RUNTIME_PACKAGE = "aws-neuronx-runtime-lib"
DMI_PRODUCT_NAME = Path("/sys/devices/virtual/dmi/id/product_name")  # the instance type on EC2 Nitro
_INSTANCE_TYPE = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9-]+")
_RUNTIME_VERSION = re.compile(r"(?:Neuron Runtime|NRT version:|aws-neuronx-runtime-lib)\s+v?(\d+(?:\.\d+){2,})")


@dataclass(frozen=True)
class ToolVersions:
    """What one host's rows were made with; None where a version could not be found."""

    compiler: str | None
    profiler: str | None
    runtime: str | None
    nki: str | None
    profiler_tool: str | None
    instance_type: str | None = None
    tracer: str | None = None  # the tracer id the worker probe chose (kernelsweep.toolchain.tracing)
    nki_compiler_frontend: str | None = None  # NKI_COMPILER_FRONTEND as the trace worker sees it (NKI 0.7)

    def updated_from(self, profile_info: Mapping[str, object]) -> ToolVersions:
        """What the profile says ran wins over what the host reported before the run: the runtime
        and profiler that wrote the profile, the instance it ran on. The compiler and NKI stay the
        host's: the profile only echoes the NEFF's build, which the host's compiler made."""

        def pick(key: str, current: str | None) -> str | None:
            value = profile_info.get(key)
            return str(value) if value else current

        return replace(
            self,
            runtime=pick("runtime_version", self.runtime),
            profiler=pick("profiler_version", self.profiler),
            instance_type=pick("instance_type", self.instance_type),
        )

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)


def parse_runtime_version(text: str) -> str | None:
    """From runtime log lines (`Neuron Runtime 2.22.14.0 built on ...`, `NRT version: 2.21.41.0`)
    or a package listing (`aws-neuronx-runtime-lib 2.21.41.0-fb1705f5f`)."""
    match = _RUNTIME_VERSION.search(text)
    return match.group(1) if match else None


def runtime_version(search_path: str | None = None, timeout_seconds: float = 30) -> str | None:
    """The installed `aws-neuronx-runtime-lib`, asked of dpkg or rpm (the runtime is a system package)."""
    queries = (
        ("dpkg-query", ["-W", "-f=${binary:Package} ${Version}\\n", RUNTIME_PACKAGE]),
        ("rpm", ["-q", "--qf", "%{NAME} %{VERSION}\\n", RUNTIME_PACKAGE]),
    )
    for tool, args in queries:
        exe = shutil.which(tool, path=search_path)
        if exe is None:
            continue
        result = run_tool([exe, *args], timeout_seconds=timeout_seconds)
        if result.returncode == 0 and not result.timed_out:
            return parse_runtime_version(result.stdout)
    return None


def instance_type(dmi_product_name: Path = DMI_PRODUCT_NAME) -> str | None:
    """`trn1.2xlarge` etc. from DMI: local, instant, no metadata-service call; None off EC2."""
    try:
        text = dmi_product_name.read_text().strip()
    except OSError:
        return None
    return text if _INSTANCE_TYPE.fullmatch(text) else None


def _compiler(toolchain: Toolchain, probed: tracing.TracerProbe | None, timeout_seconds: float) -> str | None:
    """`neuronx-cc --version`; without the command (an SDK venv whose bin is not searched), the
    neuronx-cc package the trace worker's interpreter has: it is what compiles there."""
    if "neuronx-cc" in toolchain.commands:
        return compiler_version(toolchain, timeout_seconds)
    return probed.packages.get("neuronx-cc") if probed else None


def collect(
    toolchain: Toolchain,
    probe_dir: Path,
    *,
    search_path: str | None = None,
    dmi_product_name: Path = DMI_PRODUCT_NAME,
    timeout_seconds: float = 60,
) -> ToolVersions:
    """Every version a row records: the toolchain's fixed ones (the simulator's), else asked of
    the tools it runs and of the host. The tracer and the NKI it traces with come from a probe in a
    trace worker, the same process kind that will trace, its files in `probe_dir`."""
    fixed = toolchain.fixed_versions
    runtime = fixed["runtime"] if "runtime" in fixed else runtime_version(search_path, timeout_seconds)
    probed = tracing.probe(toolchain, probe_dir) if toolchain.tracers else None
    chosen = probed.selected if probed else None
    nki = fixed["nki"] if "nki" in fixed else (chosen.nki_version if chosen else nki_version())
    instance = fixed["instance_type"] if "instance_type" in fixed else instance_type(dmi_product_name)
    has_profiler = toolchain.profiler in toolchain.commands
    return ToolVersions(
        compiler=_compiler(toolchain, probed, timeout_seconds),
        profiler=profiler_version(toolchain, timeout_seconds) if has_profiler else None,
        runtime=runtime,
        nki=nki,
        profiler_tool=toolchain.profiler if has_profiler else None,
        instance_type=instance,
        tracer=chosen.tracer_id if chosen else None,
        nki_compiler_frontend=probed.nki_compiler_frontend if probed else None,
    )
