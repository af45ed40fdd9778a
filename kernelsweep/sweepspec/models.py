"""The sweep file (TOML) and its pydantic models; kernelsweep.sweepspec.expansion turns one into points.

`SweepSpec` is also the sweep and fleet flows' parameter, so the Prefect UI renders its run form
from these models: field descriptions here are the help text users see there, and every field is
typed for the form (a dropdown of built-in kernels, a grid as a list of axes, never a JSON box).
The spec file's shorthands (`kernel = "module:attribute"`, `grid = { s = [128] }`) are accepted
and mapped onto those fields, so a file and a form describe the same model.

Every check that can fail runs in `load_spec` (kernelsweep.sweepspec.load) or the expansion, before any
work starts, and raises `UsageError` with one line naming the file, the field and the fix
(kernelsweep.sweepspec.messages). Model validation itself fails with that same line
(`SweepSpec._one_line`), so a run submitted from the UI reads like the CLI.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from kernelsweep.dtypes import DtypeName
from kernelsweep.errors import UsageError
from kernelsweep.kernels import BUILTIN
from kernelsweep.platforms import PlatformName
from kernelsweep.stores.locations import Location, parse_location
from kernelsweep.sweepspec.constraints import Exclusion
from kernelsweep.sweepspec.coverage import CoverageSettings
from kernelsweep.sweepspec.messages import ONE_LINE_ERROR, first_error
from kernelsweep.sweepspec.point import StrictModel
from kernelsweep.sweepspec.search_settings import SearchSettings

ToolchainKind = Literal["auto", "neuron", "cpu", "sim"]
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class CaptureSettings(StrictModel):
    num_exec: int = Field(10, ge=1, le=10_000, description="Executions per capture (--num-exec).")
    profile_nth_exec: int | None = Field(
        None,
        ge=1,
        description="Profile every Mth execution (--profile-nth-exec); default num_exec: one NTFF, of the last run.",
    )
    timeout_seconds: float = Field(600.0, gt=0, description="Kill a capture that runs longer.")
    repeats: int = Field(
        1, ge=1, le=100, description="Captures per point; the row gets median, min, max, p90 and p99 latency."
    )
    check_output_determinism: bool = Field(False, description="Ask the profiler to check outputs across executions.")
    profile_format: Literal["auto", "json", "summary-json", "parquet"] = Field(
        "auto", description="Profile output to extract from; auto: summary-json, which both profilers support."
    )
    hotspots: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Compile with the SDK's debug info (NKI_DEBUG_INFO) and attribute the profile's instruction "
        "time to kernel source lines, from neuron-explorer's Parquet view; on: one more view per point when "
        "profile_format is not parquet; auto: on when profile_format is parquet (no extra view).",
    )
    iterations: int = Field(
        0,
        ge=0,
        le=100_000,
        description="Also time this many executions in one process of the runtime's benchmark tool (nrtpy), "
        "under the same NeuronCore lease: per-execution latencies that compare uses; 0: off.",
    )
    dge_notifs: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Capture with --enable-dge-notifs (accurate DMA figures; may time out on large NEFFs, then "
        "captured again without); auto: on for trn2.",
    )

    @model_validator(mode="after")
    def _nth_within_num_exec(self) -> CaptureSettings:
        if self.profile_nth_exec is not None and self.profile_nth_exec > self.num_exec:
            raise ValueError(
                f"profile_nth_exec={self.profile_nth_exec} is past num_exec={self.num_exec}; "
                "raise num_exec or lower profile_nth_exec"
            )
        return self


class ExecutionSettings(StrictModel):
    compile_slots: int | None = Field(
        None, ge=1, le=256, description="Concurrent compiles on a host; empty: from its CPU cores and memory."
    )
    max_points_per_flow_run: int = Field(
        200, ge=1, le=5000, description="Larger sweeps are split into several flow runs of at most this many points."
    )
    max_unrolled_instructions: int = Field(
        100_000,
        ge=1,
        le=10**9,
        description="Refuse points whose built-in kernel unrolls to more instructions than this (NKI unrolls "
        "every loop; such a trace or compile is likely to run into its timeout); measured on no host: raise it "
        "once your host's compile times say so.",
    )
    compile_memory_limit_gb: float | None = Field(
        None,
        gt=0,
        le=4096,
        description="Cap each compile's address space at this many GiB (RLIMIT_AS): a compile past it fails as "
        "CompileOOM, not retried, and the host keeps its memory; empty: no cap (a healthy compile may reserve "
        "more address space than it uses).",
    )
    worker_wait_seconds: float = Field(
        900.0,
        gt=0,
        le=7 * 24 * 3600,
        description="Fleet runs: how long a platform's shards wait for a worker of that platform to come online "
        "before they fail (a family with no worker fails instead of waiting forever).",
    )


class Requirements(StrictModel):
    """Versions a run insists on: a host whose own differ refuses the run's points before measuring any,
    so one night's rows are never made with a mix of compilers. Each is a pattern (`2.21.*`); empty: any."""

    compiler: str = Field("", max_length=100, description="neuronx-cc version, e.g. 2.21.* (empty: any).")
    runtime: str = Field("", max_length=100, description="Neuron runtime version, e.g. 2.2* (empty: any).")
    nki: str = Field("", max_length=100, description="NKI version, e.g. 0.7.* (empty: any).")
    profiler: str = Field("", max_length=100, description="Profiler version (empty: any).")

    def pins(self) -> dict[str, str]:
        """The versions pinned, by name."""
        return {name: pattern for name, pattern in self.model_dump().items() if pattern}


class GridAxis(StrictModel):
    """One axis of a kernel's grid; a list of these (not a mapping) so the run form types every value."""

    axis: str = Field(
        min_length=1,
        description="Axis name: b, s, h, i for mlp; M, K, N for matmul; n, partition_size, free_size for vector_add.",
    )
    values: list[int] = Field(description="Values to sweep on this axis.")


class TunableAxis(StrictModel):
    """Values of one of the kernel's tunables: swept as a grid axis, or the choices a search has."""

    axis: str = Field(min_length=1, description="Tunable name: tile_m, tile_n, tile_k, loop_order for matmul.")
    values: list[int | str] = Field(min_length=1, description="Values to sweep, or to search among.")


class NamedToolchain(StrictModel):
    """One Neuron SDK environment a sweep can run points under, by name."""

    name: str = Field(pattern=_NAME_PATTERN, description="Name rows carry in toolchain_name, e.g. 2.21.")
    python: str = Field(
        min_length=1, description="The python of that SDK's environment, e.g. /opt/venvs/sdk221/bin/python."
    )


def _table_to_axes(value: object) -> object:
    """The spec file writes axes as a table (`{ s = [128, 256] }`)."""
    if isinstance(value, dict):
        return [{"axis": axis, "values": values} for axis, values in value.items()]
    return value


KernelChoice = Literal["mlp", "matmul", "vector_add", "custom"]


class KernelGrid(StrictModel):
    kernel: KernelChoice = Field(
        description="A built-in kernel, or custom to sweep your own (give it in custom_kernel). The spec file may "
        "also give module:attribute here."
    )
    custom_kernel: str = Field(
        "",
        description="Your own kernel as module:attribute of a KernelDefinition, importable on the workers; "
        "used when kernel is custom.",
    )
    grid: list[GridAxis] = Field(
        default_factory=list,
        description="Parameter axes and their values; every combination is swept. Axes with a kernel default may "
        "be left out.",
    )
    dtypes: list[DtypeName] = Field(["bfloat16"], min_length=1, description="Element types.")
    where: list[str] = Field(
        default_factory=list,
        description="Conditions every point must meet, e.g. `M * N <= 2**24` or `tile_n <= N`; points that fail "
        "one are dropped with that reason (docs/sweeps.md has the language).",
    )
    exclude: list[Exclusion] = Field(
        default_factory=list, description="Combinations to drop, e.g. M=128 with N=4096 (docs/sweeps.md)."
    )
    coverage: CoverageSettings = Field(
        default_factory=CoverageSettings,
        description="Which combinations of the grid axes to measure: full, pairwise, nwise or random.",
    )
    lnc: list[int] = Field(
        default_factory=list,
        description="Logical NeuronCore settings to sweep (e.g. 1 and 2 on trn2); empty: each platform's default. "
        "A setting a platform does not support drops that platform's points.",
    )
    toolchains: list[str] = Field(
        default_factory=list, description="Which of the spec's named toolchains run this kernel; empty: all of them."
    )
    tunables: list[TunableAxis] = Field(
        default_factory=list,
        description="Values of the kernel's tunables: grid axes without a search, the choices with one.",
    )
    search: SearchSettings | None = Field(
        None, description="Search the tunables for the fastest configuration of each shape (docs/sweeps.md)."
    )
    baseline: str = Field(
        "",
        description="Measure a baseline at every point the same way: nkilib:module:function, an NKI kernel (an "
        "nki-library one) taking the definition's inputs; its rows are the kernel's name + .baseline.",
    )

    @field_validator("baseline")
    @classmethod
    def _baseline_form(cls, value: str) -> str:
        if value:
            from kernelsweep.baselines import nki_ref

            nki_ref(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _kernel_reference(cls, data: object) -> object:
        """The spec file names kernels by module:attribute: built-in ones map to the dropdown's names,
        anything else becomes a custom kernel, so every existing spec file keeps working."""
        if not isinstance(data, dict) or not isinstance(data.get("kernel"), str):
            return data
        ref = data["kernel"]
        by_ref = {v: k for k, v in BUILTIN.items()}
        if ref in BUILTIN or ref == "custom":
            return data
        if ref in by_ref:
            return {**data, "kernel": by_ref[ref]}
        if data.get("custom_kernel"):
            raise ValueError(f"kernel {ref!r} and custom_kernel both name a kernel; keep one")
        return {**data, "kernel": "custom", "custom_kernel": ref}

    @field_validator("grid", "tunables", mode="before")
    @classmethod
    def _grid_mapping(cls, grid: object) -> object:
        return _table_to_axes(grid)

    @field_validator("lnc")
    @classmethod
    def _lnc_values(cls, lnc: list[int]) -> list[int]:
        bad = [v for v in lnc if v not in (1, 2)]
        if bad:
            raise ValueError(f"lnc {bad[0]} is no logical NeuronCore setting; use 1 or 2")
        return lnc

    @property
    def tunable_axes(self) -> dict[str, list[int | str]]:
        return {entry.axis: entry.values for entry in self.tunables}

    @field_validator("grid")
    @classmethod
    def _axes_once_and_not_empty(cls, grid: list[GridAxis]) -> list[GridAxis]:
        seen: set[str] = set()
        for entry in grid:
            if not entry.values:
                raise ValueError(f"axis {entry.axis!r} is empty; give it at least one value")
            if entry.axis in seen:
                raise ValueError(f"axis {entry.axis!r} is given twice; merge its values")
            seen.add(entry.axis)
        return grid

    @model_validator(mode="after")
    def _custom_needs_a_reference(self) -> KernelGrid:
        if self.kernel == "custom" and not self.custom_kernel:
            raise ValueError("kernel is custom but custom_kernel is empty; give module:attribute of your kernel")
        if self.kernel != "custom" and self.custom_kernel:
            raise ValueError(f"custom_kernel is set but kernel is {self.kernel}; choose custom or clear custom_kernel")
        return self

    @property
    def ref(self) -> str:
        """The kernel definition's import path (module:attribute)."""
        return self.custom_kernel if self.kernel == "custom" else BUILTIN[self.kernel]

    @property
    def axes(self) -> dict[str, list[int]]:
        return {entry.axis: entry.values for entry in self.grid}


class SweepSpec(StrictModel):
    """A sweep: kernels x parameter grid x dtypes x platforms."""

    name: str = Field(pattern=_NAME_PATTERN, description="Sweep name, recorded in every row.")
    platforms: list[PlatformName] = Field(min_length=1, description="Platforms to sweep: trn1, trn2, inf2, trn3.")
    kernels: list[KernelGrid] = Field(min_length=1, description="Kernels to sweep, each with its grid and dtypes.")
    capture: CaptureSettings = Field(default_factory=CaptureSettings, description="How each point is profiled.")
    execution: ExecutionSettings = Field(
        default_factory=ExecutionSettings, description="How the sweep is spread over flow runs and hosts."
    )
    toolchain: ToolchainKind = Field(
        "auto",
        description="auto: real Neuron tools when present, else the simulator; cpu: the real SDK traces and "
        "compiles, the simulator captures (no device needed; rows are marked simulated).",
    )
    neuron_python: str = Field(
        "",
        description="The Python of the Neuron SDK's environment (e.g. /opt/aws_neuronx_venv_pytorch_2_9/bin/python) "
        "that traces and compiles; empty: KERNELSWEEP_NEURON_PYTHON, else found.",
    )
    results: str = Field("results", description="Results location: a folder or s3://bucket/prefix.")
    artifacts: str = Field("artifacts", description="Artifact store: a folder or s3://bucket/prefix.")
    seed: int = Field(0, ge=0, description="Seed for generated inputs.")
    require: Requirements = Field(
        default_factory=Requirements,
        description="Pin SDK versions: hosts whose versions do not match refuse this run's points.",
    )
    toolchains: list[NamedToolchain] = Field(
        default_factory=list,
        description="Named Neuron SDK environments to run every point under, each by its python (the spec file: "
        '[toolchains] "2.21" = "/opt/venvs/sdk221/bin/python"); rows carry the name in toolchain_name.',
    )
    recheck_tuned: SearchSettings | None = Field(
        None,
        description="Fleet runs: after the shards, re-check the tuned store's bests of these kernels and platforms "
        "on the hosts' toolchain, re-tuning a key whose best flipped with this search (e.g. { effort = "
        '"quick" }); empty: off. Nothing runs while the store holds no best of them.',
    )

    @field_validator("toolchains", mode="before")
    @classmethod
    def _toolchain_table(cls, value: object) -> object:
        if isinstance(value, dict):
            return [{"name": name, "python": python} for name, python in value.items()]
        return value

    @property
    def results_location(self) -> Location:
        return parse_location(self.results, "results location")

    @property
    def artifacts_location(self) -> Location:
        return parse_location(self.artifacts, "artifact store location")

    @model_validator(mode="wrap")
    @classmethod
    def _one_line(cls, data: object, handler: ModelWrapValidatorHandler[SweepSpec]) -> SweepSpec:
        """Whoever validates a spec (the CLI, or Prefect checking a run's parameters from the UI) gets
        the same one line naming the field and the fix, not pydantic's multi-line report."""
        try:
            return handler(data)
        except ValidationError as exc:
            raise PydanticCustomError(ONE_LINE_ERROR, "{message}", {"message": first_error(exc, data)}) from None

    @model_validator(mode="after")
    def _usable_values(self) -> SweepSpec:
        problem = _value_problem(self)
        if problem:
            raise PydanticCustomError(ONE_LINE_ERROR, "{message}", {"message": problem})
        return self


# Checks of values the field types let through (a model check, so the UI form's run is refused alike).

MAX_AXIS_VALUE = 2**31 - 1
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600.0
_LOCATION_CHARS = re.compile(r"^[^\x00-\x1f\x7f]{1,1024}$")


def _value_problem(spec: SweepSpec) -> str | None:
    """What the field types let through but no run can use: non-finite or absurd numbers, unusable
    locations. A model check, so a run started from the UI form is refused with the same line."""
    for where, value in _numbers(spec.model_dump()):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where} is {value}; give a finite number"
    if spec.capture.timeout_seconds > MAX_TIMEOUT_SECONDS:
        return (
            f"capture.timeout_seconds={spec.capture.timeout_seconds:g} is over a week; "
            f"give at most {MAX_TIMEOUT_SECONDS:g}"
        )
    for index, entry in enumerate(spec.kernels):
        for axis, values in entry.axes.items():
            bad = [v for v in values if not 0 <= v <= MAX_AXIS_VALUE]
            if bad:
                return f"kernels[{index}].grid.{axis} has {bad[0]}, out of range; axis values are 0 to {MAX_AXIS_VALUE}"
    problem = _toolchain_problem(spec)
    if problem:
        return problem
    for key in ("results", "artifacts"):
        if not _LOCATION_CHARS.match(getattr(spec, key)):
            return f"{key} must be a folder path or s3:// URI of 1 to 1024 printable characters"
    try:
        parse_location(spec.results, "results location")
        parse_location(spec.artifacts, "artifact store location")
    except UsageError as exc:
        return exc.message

    return None


def _toolchain_problem(spec: SweepSpec) -> str | None:
    """Named toolchains are SDK environments: unique names, a toolchain that uses them, blocks naming
    only them."""
    names_given = [t.name for t in spec.toolchains]
    if len(set(names_given)) != len(names_given):
        return "toolchains: a name is given twice; give each SDK environment one name"
    if spec.toolchains and spec.toolchain == "sim":
        return "toolchains name SDK environments, which toolchain = sim never uses; set toolchain = cpu or neuron"
    for index, entry in enumerate(spec.kernels):
        unknown = [n for n in entry.toolchains if n not in names_given]
        if unknown:
            known = ", ".join(names_given) or "none: add a [toolchains] table"
            return f"kernels[{index}].toolchains names {unknown[0]!r}, which [toolchains] does not; named: {known}"
    return None


def _numbers(value: object, where: str = "") -> list[tuple[str, float | int]]:
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _numbers(v, f"{where}.{k}" if where else str(k))]
    if isinstance(value, list):
        return [n for i, v in enumerate(value) for n in _numbers(v, f"{where}[{i}]")]
    return [(where, value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []
