"""The smoke check's shared state and its steps that need no NEFF: devices, versions, tracers, and the
outputs check (kernelsweep.doctor.smoke runs them in order; kernelsweep.doctor.smoke_render renders them)."""

from __future__ import annotations

import shutil
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from kernelsweep import names
from kernelsweep.correctness import check_outputs
from kernelsweep.dtypes import numpy_dtype
from kernelsweep.kernels import load_kernel
from kernelsweep.locks import CoreLease
from kernelsweep.platforms import get_platform
from kernelsweep.profiles.metrics import ProfileMetrics, read_profile
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import compiler, profiler, tracing
from kernelsweep.toolchain.compiler import compiler_version
from kernelsweep.toolchain.devices import list_devices
from kernelsweep.toolchain.neff import NeffInfo, read_neff
from kernelsweep.toolchain.process import ToolResult, run_tool
from kernelsweep.toolchain.profiler import ntff_execution, parse_profiler_version
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.tracing.artifacts import ARTIFACTS

OK, WARN, FAIL, INFO, SKIP = "ok", "warn", "fail", "info", "skip"
T = TypeVar("T")


@dataclass
class Step:
    title: str
    status: str = OK
    verdict: str = ""
    runs: list[ToolResult] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    risks: tuple[str, ...] = ()  # what it rules out when it passes (kernelsweep.doctor.risks)
    show_all: bool = False  # every line of its tools' output on the terminal, not just the first


class Skipped(Exception):
    """A step that cannot run: an earlier one did not produce what it needs, or it does not apply here."""


def needs(value: T | None, what: str) -> T:
    if value is None:
        raise Skipped(f"needs {what}, which an earlier step did not produce")
    return value


@dataclass
class Smoke:
    """What the steps hand on: the point, the core to capture on, the tracer, the NEFF, the NTFF."""

    toolchain: Toolchain
    point: Point
    workdir: Path
    core: str = "0"
    tracer: str | None = None
    neff: Path | None = None
    ntff: Path | None = None
    saved: dict[str, Path] = field(default_factory=dict)
    profiler_version: str | None = None
    metrics: ProfileMetrics | None = None  # the point's summary-json profile, read as a sweep reads it

    @property
    def target(self) -> str:
        return get_platform(self.point.platform).compiler_target

    def fresh(self, name: str) -> Path:
        folder = self.workdir / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def input_files(self, folder: Path, point: Point | None = None) -> dict[str, Path]:
        point = point or self.point
        arrays = load_kernel(point.kernel_ref).build_inputs(point.params, point.dtype, point.seed)
        files = {}
        for name, array in arrays.items():
            files[name] = folder / names.input_file(name)
            files[name].write_bytes(np.ascontiguousarray(array).tobytes())
        return files

    def lease(self) -> AbstractContextManager[CoreLease]:
        """The core the smoke captures on, for a tracer that executes the kernel (NKI 0.7's nki.jit
        route): the smoke runs its steps one at a time, so nothing else holds it."""
        return nullcontext(CoreLease(int(self.core), ()))

    def compile_legacy(self, ir_archive: Path) -> Path:
        folder = tracing.unpack(ir_archive, self.fresh("compile"))
        platform = get_platform(self.point.platform)
        lnc = platform.compile_lnc(self.point.lnc)
        return compiler.compile_ir(self.toolchain, folder / names.PENGUIN, folder, self.target, lnc, 900.0)

    def neff_info(self) -> NeffInfo:
        assert self.neff is not None
        return read_neff(self.neff)

    def probe(self, step: Step) -> None:
        found = tracing.probe(self.toolchain, self.fresh("probe"), check_runtime_at_lnc=self.point.lnc)
        for status in found.statuses:
            state = f"{status.tracer_id} (nki {status.nki_version})" if status.available else status.reason
            mark = " [best effort]" if status.best_effort else ""
            step.details.append(f"{status.name}{mark}: {'available' if status.available else 'unavailable'}: {state}")
            if status.signatures:
                step.details.append(f"  {status.signatures}")
        chosen = found.selected
        if chosen is None:
            step.status, step.verdict = FAIL, f"no usable NKI tracing API: {found.describe_failures()}"
            return
        self.tracer = chosen.tracer_id
        held = {True: "held a NeuronCore", False: "held no NeuronCore", None: "was not checked with neuron-ls"}
        step.verdict = (
            f"sweeps trace with {chosen.tracer_id}; a worker that imported the SDK {held[found.holds_device]}"
        )
        step.status = WARN if found.holds_device else OK
        if chosen.name == ARTIFACTS.name:  # every compile API failed: the documented 0.7 route is left
            step.status = WARN
            step.verdict += f"; fell to {ARTIFACTS.name}, the last resort: it executes each kernel as it compiles"

    def read_metrics(self, path: Path, step: Step) -> ProfileMetrics:
        metrics = read_profile(path)
        total = metrics.values.get("total_time_us")
        shown = "none" if total is None else f"{total:.3f}"
        step.details.append(f"total_time {shown} us, percents read as {metrics.percent_unit}")
        return metrics


def devices(state: Smoke, step: Step) -> None:
    lnc = state.point.lnc
    inventory = list_devices(state.toolchain, default_lnc=lnc, lnc=lnc)
    free = inventory.free_cores
    state.core = str((free or inventory.logical_cores or [0])[0])
    step.verdict = (
        f"{len(inventory.logical_cores)} logical NeuronCores at LNC={inventory.lnc}; "
        f"free: {free or 'none'}; capturing on core {state.core}"
    )
    if inventory.lnc != lnc:
        step.status = WARN
        step.verdict += f"; neuron-ls ignored NEURON_LOGICAL_NC_CONFIG={lnc}"
    if inventory.held_notice():
        step.status = WARN
        step.details.append(inventory.held_notice() or "")


def versions_step(state: Smoke, step: Step) -> None:
    """The compiler's version, and the profiler's `--version` banner, whose format is undocumented."""
    compiler_found = compiler_version(state.toolchain) if "neuronx-cc" in state.toolchain.commands else None
    result = run_tool(state.toolchain.command(state.toolchain.profiler) + ["--version"], env=state.toolchain.env,
                      timeout_seconds=60)  # fmt: skip
    banner = next((line for line in result.output.splitlines() if line.strip()), "")
    parsed = parse_profiler_version(result.output) if result.returncode == 0 else None
    state.profiler_version = parsed
    step.verdict = (
        f"neuronx-cc {compiler_found or 'not found'}; {state.toolchain.profiler} {parsed or 'version unknown'}"
    )
    if compiler_found is None or parsed is None:
        step.status = WARN
    if parsed is None:
        step.verdict += f" (banner {banner!r} has no dotted version: extraction stays summary-json)"


def correctness(state: Smoke, step: Step) -> None:
    if state.neff is None or not state.saved:
        raise Skipped("needs a capture's saved outputs")
    step.status, step.verdict = outputs_check(
        state.point, state.neff_info().outputs, state.saved, state.workdir / "capture"
    )


def outputs_check(point: Point, neff_outputs: list[str], saved: dict[str, Path], folder: Path) -> tuple[str, str]:
    """(status, verdict): the outputs a capture saved in `folder`, mapped to the kernel's names (else
    by NEFF position), against the numpy reference on the very inputs written there."""
    definition = load_kernel(point.kernel_ref)
    wanted = [t.name for t in definition.output_infos(point.params, point.dtype)]
    mapped = profiler.outputs_by_kernel_name(saved, neff_outputs, wanted)
    arrays = {
        t.name: np.fromfile(folder / names.input_file(t.name), dtype=numpy_dtype(t.dtype)).reshape(t.shape)
        for t in definition.input_infos(point.params, point.dtype)
    }
    actual = {
        t.name: np.fromfile(mapped[t.name], dtype=numpy_dtype(t.dtype)).reshape(t.shape)
        for t in definition.output_infos(point.params, point.dtype)
        if t.name in mapped
    }
    if len(actual) != len(wanted):
        return FAIL, f"saved {sorted(saved)}: no file for {sorted(set(wanted) - set(actual))}"
    check = check_outputs(actual, definition.reference(arrays, point.params), point.dtype)
    renamed = {k: v.name for k, v in mapped.items() if v.name != k}
    verdict = f"{'correct' if check.passed else 'WRONG'}: max abs error {check.max_abs_error:.3g}"
    if renamed:
        verdict += f" (outputs mapped by NEFF position: {renamed})"
    return (OK if check.passed else FAIL), verdict


def ntff_listing(folder: Path) -> list[str]:
    """The NTFFs in a capture folder, in execution order."""
    return sorted((p.name for p in folder.glob("*.ntff")), key=ntff_execution)
