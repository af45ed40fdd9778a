"""`kernelsweep doctor`: what of the Neuron toolchain this host has, what is missing, and the fix.

Every sweep on a new host starts with "why is it using the simulator?" or "which SDK made these
numbers?"; this answers both in one screen, from the same lookups the sweep itself uses
(toolchain.resolve, versions, tracing), so the report cannot disagree with what a run does.
`doctor --smoke` (kernelsweep.doctor.smoke) goes further and runs one point through every tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kernelsweep.errors import KernelsweepError
from kernelsweep.platforms import PLATFORM_NAMES, get_platform
from kernelsweep.this_host import scratch
from kernelsweep.this_host.family import family_of
from kernelsweep.toolchain import packages, tracing, versions
from kernelsweep.toolchain.compiler import compiler_version
from kernelsweep.toolchain.devices import DeviceInventory, list_devices
from kernelsweep.toolchain.profiler import profiler_version
from kernelsweep.toolchain.resolve import (
    NEURON_BIN_DIR,
    Toolchain,
    find_neuron_tools,
    neuron_available,
    neuron_devices,
    tool_search_path,
)
from kernelsweep.toolchain.tracing.artifacts import ARTIFACTS
from kernelsweep.toolchain.tracing.interpreter import (
    NEURON_PYTHON_ENV,
    SDK_VENV_GLOBS,
    NeuronPython,
    choose_neuron_python,
)
from kernelsweep.toolchain.tracing.tracers import TRACERS

NEURON_PIP = "python -m pip install --extra-index-url=https://pip.repos.neuron.amazonaws.com"
NEURON_REPO = "the Neuron apt/yum repository (apt.repos.neuron.amazonaws.com / yum.repos.neuron.amazonaws.com)"
CORE_PACKAGES = ("numpy", "pyarrow", "ijson", "pydantic", "prefect")
OK, MISSING, WARN, INFO = "ok", "missing", "warn", "info"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | missing | warn | info
    found: str  # what was found (path, version), or what was looked for
    fix: str | None = None  # one line, for missing and warn


@dataclass(frozen=True)
class Host:
    """Where to look; the defaults are this machine (tests point them at stand-ins)."""

    path: str | None = None  # PATH to search; None: the process's PATH
    extra_paths: Sequence[str | Path] = ()
    dev_dir: Path = Path("/dev")
    dmi_product_name: Path = versions.DMI_PRODUCT_NAME
    timeout_seconds: float = 20
    neuron_python: str | None = None  # KERNELSWEEP_NEURON_PYTHON, as the CLI read it
    sdk_venvs: tuple[str, ...] = SDK_VENV_GLOBS  # where an SDK venv is looked for
    temp_dir: Path | None = None  # where stage scratch folders are; None: the temporary folder


def diagnose(host: Host | None = None) -> list[Check]:
    """One check per tool or resource, in a fixed order; the last is the verdict (which toolchain runs)."""
    host = host or Host()
    python = _neuron_python(host)
    extra = (*host.extra_paths, *([Path(python.path).parent] if python.foreign else []))
    tools = find_neuron_tools(host.path, extra)
    toolchain = Toolchain(kind="neuron", commands=tools, tracers=TRACERS, neuron_python=python)
    try:
        with scratch.scratch("probe") as probe_dir:
            probed: tracing.TracerProbe | None = tracing.probe(toolchain, probe_dir)
        problem = ""
    except KernelsweepError as exc:  # the worker cannot start there (a Python older than 3.10)
        probed, problem = None, exc.message
    return [
        _compiler(toolchain, host),
        _profiler(toolchain, host),
        _neuron_ls(toolchain, host),
        _devices(host),
        _runtime(host),
        _python_check(python, probed, problem),
        _tracer(probed),
        _sdk_packages(python, probed),
        *_support(_installed_nki(python, probed), family_of(versions.instance_type(host.dmi_product_name))),
        _core_packages(),
        _instance(host),
        _scratch(host),
        _verdict(tools, host, probed),
    ]


def _neuron_python(host: Host) -> NeuronPython:
    own_has_sdk = any(packages.package_version(name).usable for name in packages.SDK_PACKAGES)
    return choose_neuron_python(None, host.neuron_python, own_has_sdk=own_has_sdk, globs=host.sdk_venvs)


def _python_check(python: NeuronPython, probed: tracing.TracerProbe | None, problem: str) -> Check:
    """The interpreter that traces and compiles: kernelsweep's own, or the SDK environment's."""
    if probed is None:
        return Check(
            "Neuron Python", MISSING, f"{python.path} ({python.source}): {problem}",
            f"set {NEURON_PYTHON_ENV} (or the spec's neuron_python) to a Python 3.10+ that has the Neuron SDK",
        )  # fmt: skip
    return Check(
        "Neuron Python", OK if python.foreign or probed.packages else INFO, f"{probed.python}, {python.source}"
    )


def _where(host: Host) -> str:
    extra = "".join(f", {path}" for path in host.extra_paths)
    return f"on PATH{extra} or in {NEURON_BIN_DIR}"


def _compiler(toolchain: Toolchain, host: Host) -> Check:
    if "neuronx-cc" not in toolchain.commands:
        return Check("neuronx-cc", MISSING, f"not {_where(host)}", f"{NEURON_PIP} neuronx-cc")
    exe = toolchain.commands["neuronx-cc"][0]
    version = compiler_version(toolchain, host.timeout_seconds)
    if version is None:
        return Check("neuronx-cc", WARN, f"{exe}: --version printed no version", f"reinstall: {NEURON_PIP} neuronx-cc")
    return Check("neuronx-cc", OK, f"{exe} (NeuronX Compiler version {version})")


def _profiler(toolchain: Toolchain, host: Host) -> Check:
    names = [n for n in ("neuron-explorer", "neuron-profile") if n in toolchain.commands]
    if not names:
        return Check(
            "profiler",
            MISSING,
            f"neither neuron-explorer nor neuron-profile {_where(host)}",
            f"install aws-neuronx-tools from {NEURON_REPO}",
        )
    tool = toolchain.profiler
    version = profiler_version(toolchain, host.timeout_seconds) or "version unknown"
    found = f"{tool} {version} at {toolchain.commands[tool][0]}"
    if len(names) == 2:
        found += " (preferred over neuron-profile, also found)"
    if tool == "neuron-profile":
        return Check(
            "profiler",
            WARN,
            found,
            "neuron-profile ended with SDK 2.29; upgrade aws-neuronx-tools "
            "for neuron-explorer (same capture interface, Parquet profiles)",
        )
    return Check("profiler", OK, found)


def _neuron_ls(toolchain: Toolchain, host: Host) -> Check:
    if "neuron-ls" not in toolchain.commands:
        return Check("neuron-ls", MISSING, f"not {_where(host)}", f"install aws-neuronx-tools from {NEURON_REPO}")
    exe = toolchain.commands["neuron-ls"][0]
    try:
        inventory = list_devices(toolchain, timeout_seconds=host.timeout_seconds)
    except KernelsweepError as exc:
        return Check("neuron-ls", WARN, f"{exe}: {exc.message}", "check the Neuron driver: lsmod | grep neuron")
    return Check("neuron-ls", OK, f"{exe}: {describe_inventory(inventory)}")


def describe_inventory(inventory: DeviceInventory) -> str:
    cores = inventory.logical_cores
    physical = [p for core in cores for p in inventory.physical_cores(core)]
    text = (
        f"{len(inventory.devices)} device(s), {len(cores)} logical NeuronCores at LNC={inventory.lnc} "
        f"(ids {_span(cores)}; physical {_span(physical)})"
    )
    holders = [f"pid {p.pid} ({p.command})" for d in inventory.devices for p in d.processes]
    return text + (f"; in use by {', '.join(holders)}" if holders else "; no other process on them")


def _span(ids: list[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]}-{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) else ",".join(map(str, ids))


def _devices(host: Host) -> Check:
    found = neuron_devices(host.dev_dir)
    if not found:
        return Check(
            "devices",
            MISSING,
            f"no {host.dev_dir / 'neuron*'}",
            "run on a trn1/trn2/inf2/trn3 instance with the Neuron driver (aws-neuronx-dkms) loaded",
        )
    shown = ", ".join(map(str, found)) if len(found) <= 4 else f"{len(found)} nodes, {found[0]} ... {found[-1]}"
    return Check("devices", OK, shown)


def _runtime(host: Host) -> Check:
    version = versions.runtime_version(tool_search_path(host.path, host.extra_paths), host.timeout_seconds)
    if version is None:
        return Check(
            "runtime",
            MISSING,
            f"{versions.RUNTIME_PACKAGE} not installed (asked dpkg/rpm)",
            f"install {versions.RUNTIME_PACKAGE} from {NEURON_REPO}",
        )
    return Check("runtime", OK, f"{versions.RUNTIME_PACKAGE} {version}")


def _tracer(probed: tracing.TracerProbe | None) -> Check:
    """The trace worker's own probe: importable AND a signature variant the adapters know."""
    chosen = probed.selected if probed else None
    if probed is None:
        return Check(
            "NKI tracer", MISSING, "not probed: the trace worker could not start", f"{NEURON_PIP} neuronx-cc nki"
        )
    if chosen is None:
        tried = "; ".join(f"{s.name}: {_short(s.reason)}" for s in probed.statuses)
        return Check("NKI tracer", MISSING, f"none usable ({tried})", f"{NEURON_PIP} neuronx-cc nki")
    effort = ", best effort" if chosen.best_effort else ""
    found = f"{chosen.tracer_id} (nki {chosen.nki_version}; newest usable API{effort})"
    if chosen.name == ARTIFACTS.name:  # no compile API fits: NKI 0.7's documented route, which executes
        return Check(
            "NKI tracer", WARN, f"{found}: no compile API kernelsweep knows fits; each point is compiled by "
            "executing it on its leased core", "send `kernelsweep doctor --smoke`'s report: step 4 prints the API",
        )  # fmt: skip
    if probed.nki_compiler_frontend:  # NKI 0.7's way back to the old specialization (addendum F2)
        return Check(
            "NKI tracer", WARN, f"{found}; NKI_COMPILER_FRONTEND={probed.nki_compiler_frontend} (recorded in rows)",
            "unset NKI_COMPILER_FRONTEND: deprecated in SDK 2.33, removed in 2.34",
        )  # fmt: skip
    return Check("NKI tracer", OK, found)


def _short(reason: str, limit: int = 70) -> str:
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


def _sdk_packages(python: NeuronPython, probed: tracing.TracerProbe | None) -> Check:
    if python.foreign:  # the SDK environment's, as the trace worker found them there
        found_there = ", ".join(f"{name} {version}" for name, version in (probed.packages if probed else {}).items())
        if not found_there:
            return Check("SDK packages", MISSING, f"none in {python.path}", f"{python.path} -m pip install ... nki")
        return Check("SDK packages", OK, f"{found_there} (in {python.path})")
    found = [packages.package_version(name) for name in packages.SDK_PACKAGES]
    text = ", ".join(p.describe() for p in found)
    if any(p.placeholder for p in found):
        placeholders = " ".join(p.name for p in found if p.placeholder)
        return Check(
            "SDK packages", WARN, text, f"python -m pip uninstall -y {placeholders}; then {NEURON_PIP} neuronx-cc nki"
        )
    if not any(p.usable for p in found):
        return Check("SDK packages", MISSING, text, f"{NEURON_PIP} neuronx-cc nki")
    return Check("SDK packages", OK, text)


def _installed_nki(python: NeuronPython, probed: tracing.TracerProbe | None) -> str | None:
    """The NKI the trace worker will import: the SDK environment's when that is another interpreter."""
    if python.foreign:
        return probed.packages.get("nki") if probed else None
    return packages.nki_version()


def _support(nki: str | None, this_family: str | None) -> list[Check]:
    """One row per family: which NKI AWS supports there (and the source), against the installed one;
    a warning for this host's own family, a note for the others (a fleet's other hosts)."""
    checks = []
    for name in PLATFORM_NAMES:
        support = get_platform(name).nki_support
        verdict = support.verdict(nki)
        found = f"{support.text} ({support.source})"
        if verdict is None:
            checks.append(Check(f"support {name}", INFO, found))
        elif verdict:
            checks.append(Check(f"support {name}", OK, f"nki {nki}: {found}"))
        elif name == this_family:
            fix = f"sweep {name} with an SDK whose NKI it supports, or expect unsupported kernels to fail"
            checks.append(Check(f"support {name}", WARN, f"nki {nki} is outside it: {found}", fix))
        else:
            checks.append(Check(f"support {name}", INFO, f"nki {nki} is outside it: {found}"))
    return checks


def _core_packages() -> Check:
    present, missing = [], []
    for name in CORE_PACKAGES:
        try:
            present.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        return Check(
            "kernelsweep deps",
            MISSING,
            f"missing {', '.join(missing)}",
            "python -m pip install -e . (from the kernelsweep checkout)",
        )
    return Check("kernelsweep deps", OK, ", ".join(present))


def _instance(host: Host) -> Check:
    instance = versions.instance_type(host.dmi_product_name)
    if instance is None:
        return Check("instance type", INFO, f"unknown (not an EC2 instance: {host.dmi_product_name})")
    return Check("instance type", OK, instance)


def _scratch(host: Host) -> Check:
    """What stage scratch folders the temporary folder holds: those of runs that died are removed by the
    next run here (kernelsweep.this_host.scratch), so a pile of them says no run has started since."""
    count, size, orphaned = scratch.left(host.temp_dir)
    found = f"{count} folder(s), {size / 2**20:.1f} MiB, {orphaned} of runs that died"
    if not orphaned:
        return Check("scratch folders", OK, found)
    return Check("scratch folders", WARN, found, "the next `kernelsweep run` or `bench` on this host removes them")


def _verdict(tools: dict[str, tuple[str, ...]], host: Host, probed: tracing.TracerProbe | None) -> Check:
    if neuron_available(tools, host.dev_dir):
        return Check("toolchain", OK, "neuron: `--toolchain auto` runs the real tools on this host")
    if probed is not None and probed.selected is not None:
        return Check(
            "toolchain",
            INFO,
            "cpu: the Neuron SDK traces and compiles here but there is no device: `--toolchain cpu` runs the real "
            "trace and compile, checks outputs with nki.simulate, and takes capture and timing from the simulator "
            "(rows: toolchain=cpu, is_simulation=true, timing_source=simulator); `--toolchain auto` uses the simulator",
        )
    return Check(
        "toolchain",
        INFO,
        "sim: no complete Neuron SDK + device here, so `--toolchain auto` uses the simulated toolchain "
        "(every row is marked simulated); `--toolchain neuron` fails until the items above are fixed",
    )


def host_family(toolchain: Toolchain, dmi_product_name: Path = versions.DMI_PRODUCT_NAME) -> tuple[str | None, str]:
    """This host's family and the instance type it was read from (DMI, else neuron-ls); (None, why)
    where neither names one (a simulator emulating every family, or a host off EC2)."""
    instance = toolchain.fixed_versions.get("instance_type") or versions.instance_type(dmi_product_name)
    if family_of(instance) is None and "neuron-ls" in toolchain.commands:
        try:
            instance = list_devices(toolchain).instance_type
        except KernelsweepError:
            instance = None
    family = family_of(instance)
    return family, f"instance type {instance}" if family else "no instance type names a Neuron family"


def platform_mismatch(asked: str, family: str | None, source: str) -> str | None:
    """One line when `--platform` names another family than this host's (its NEFFs would not load)."""
    if family is None or family == asked:
        return None
    return (
        f"doctor --smoke --platform {asked}: this host is {family} ({source}), and a {asked} NEFF cannot "
        f"run on it; run the smoke on a {asked} host, or leave out --platform to check this {family}"
    )


def render(checks: Sequence[Check]) -> str:
    """Plain aligned text: it goes to terminals, CI logs and the README alike."""
    width = max(len(c.name) for c in checks) + 2
    lines = ["kernelsweep doctor", ""]
    for check in checks:
        lines.append(f"{check.status:<8} {check.name:<{width}}{check.found}")
        if check.fix:
            lines.append(f"{'':<8} {'':<{width}}fix: {check.fix}")
    return "\n".join(lines)


def report(host: Host | None = None) -> tuple[str, int]:
    """The report and the exit code: 0 when the real toolchain is complete, 1 when runs will use the sim."""
    checks = diagnose(host)
    return render(checks), 0 if checks[-1].status == OK else 1
