"""The sweep file (TOML), its pydantic models, and expansion into points.

`SweepSpec` is also the sweep flow's parameter, so the Prefect UI renders its run form from these
models: field descriptions here are the help text users see there.

Every check that can fail runs in `load_spec` / `expand`, before any work starts, and raises
`UsageError` with one line naming the file, the field and the fix.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kernelsweep.dtypes import DTYPE_NAMES, DtypeName
from kernelsweep.errors import InvalidShapeError, UsageError
from kernelsweep.kernels import KernelDefinition, load_kernel
from kernelsweep.platforms import PLATFORM_NAMES, PlatformName, get_platform

ToolchainKind = Literal["auto", "neuron", "sim"]
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaptureSettings(_Strict):
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

    @model_validator(mode="after")
    def _nth_within_num_exec(self) -> CaptureSettings:
        if self.profile_nth_exec is not None and self.profile_nth_exec > self.num_exec:
            raise ValueError(
                f"profile_nth_exec={self.profile_nth_exec} is past num_exec={self.num_exec}; "
                "raise num_exec or lower profile_nth_exec"
            )
        return self


class ExecutionSettings(_Strict):
    compile_slots: int | None = Field(
        None, ge=1, le=256, description="Concurrent compiles on this host; default from CPU cores and memory."
    )
    max_points_per_flow_run: int = Field(
        200, ge=1, le=5000, description="Larger sweeps are split into several flow runs of at most this many points."
    )


class KernelGrid(_Strict):
    kernel: str = Field(description="Kernel definition as module:attribute, e.g. kernelsweep.kernels.mlp:mlp.")
    grid: dict[str, list[int]] = Field(
        default_factory=dict, description="Parameter axes: name -> values; the full grid is swept."
    )
    dtypes: list[DtypeName] = Field(["bfloat16"], min_length=1, description="Element types.")

    @field_validator("grid")
    @classmethod
    def _axes_not_empty(cls, grid: dict[str, list[int]]) -> dict[str, list[int]]:
        for axis, values in grid.items():
            if not values:
                raise ValueError(f"axis {axis!r} is empty; give it at least one value")
        return grid


class SweepSpec(_Strict):
    """A sweep: kernels x parameter grid x dtypes x platforms."""

    name: str = Field(pattern=_NAME_PATTERN, description="Sweep name, recorded in every row.")
    platforms: list[PlatformName] = Field(min_length=1, description="Platforms to sweep.")
    kernels: list[KernelGrid] = Field(min_length=1)
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
    toolchain: ToolchainKind = Field("auto", description="auto: real Neuron tools when present, else the simulator.")
    results: str = Field("results", description="Results location: a folder or s3://bucket/prefix.")
    artifacts: str = Field("artifacts", description="Artifact store: a folder or s3://bucket/prefix.")
    seed: int = Field(0, ge=0, description="Seed for generated inputs.")


class Point(_Strict):
    """One kernel x parameters x dtype x platform: the unit that becomes one result row."""

    sweep: str
    kernel: str
    kernel_ref: str
    params: dict[str, int]
    dtype: str
    platform: str
    lnc: int
    seed: int

    @property
    def shape(self) -> str:
        """Canonical shape string, e.g. `b=1,s=128,h=1024,i=512`, in the kernel's axis order."""
        return ",".join(f"{k}={v}" for k, v in self.params.items())

    @property
    def point_id(self) -> str:
        raw = f"{self.kernel}-{self.shape}-{self.dtype}-{self.platform}"
        return re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such spec file; check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    return parse_spec(data, source=str(path))


def parse_spec(data: dict, source: str = "spec") -> SweepSpec:
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{source}: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "top level"
    if err["type"] == "extra_forbidden":
        return f"unknown key {where!r}; remove it or check its spelling"
    if err["type"] == "missing":
        return f"missing required key {where!r}; add it"
    if err["type"] == "literal_error" and err["loc"] and err["loc"][0] == "platforms":
        return f"unknown platform {err['input']!r} at {where}; use one of {', '.join(PLATFORM_NAMES)}"
    if err["type"] == "literal_error" and "dtypes" in err["loc"]:
        return f"unknown dtype {err['input']!r} at {where}; use one of {', '.join(DTYPE_NAMES)}"
    message = err["msg"].removeprefix("Value error, ")
    return f"{where}: {message}"


def expand(spec: SweepSpec, source: str = "spec") -> list[Point]:
    """The full grid, checked against each kernel's own rules; all errors before any work."""
    points: list[Point] = []
    for index, entry in enumerate(spec.kernels):
        where = f"{source}: kernels[{index}]"
        definition = _import_kernel(entry.kernel, where)
        unknown = sorted(set(entry.grid) - set(definition.axes))
        if unknown:
            raise UsageError(
                f"{where}: kernel {definition.name} takes no axis {unknown[0]!r}; "
                f"its axes are {', '.join(definition.axes)}"
            )
        missing = [a for a in definition.axes if a not in entry.grid and a not in definition.defaults]
        if missing:
            raise UsageError(f"{where}: axis {missing[0]!r} of kernel {definition.name} needs values")
        for dtype in entry.dtypes:
            if dtype not in definition.dtypes:
                raise UsageError(
                    f"{where}: kernel {definition.name} does not support dtype {dtype}; "
                    f"use one of {', '.join(definition.dtypes)}"
                )
        axes = [a for a in definition.axes if a in entry.grid]
        for values in itertools.product(*(entry.grid[a] for a in axes)):
            params = definition.resolve(dict(zip(axes, values, strict=True)))
            params = {a: params[a] for a in definition.axes}
            for dtype in entry.dtypes:
                _check_shape(definition, params, dtype, where)
                points.extend(_per_platform(spec, entry.kernel, definition, params, dtype))
    return points


def _import_kernel(ref: str, where: str) -> KernelDefinition:
    """A user's module runs arbitrary code at import: whatever it raises, or an exit, is one line."""
    try:
        return load_kernel(ref)
    except (ImportError, AttributeError, TypeError) as exc:
        raise UsageError(
            f"{where}: cannot import kernel {ref!r} ({exc}); "
            "give module:attribute of a KernelDefinition on the Python path"
        ) from None
    except (Exception, SystemExit) as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(f"{where}: importing kernel {ref!r} failed ({detail}); fix the module") from None


def _check_shape(definition: KernelDefinition, params: dict[str, int], dtype: str, where: str) -> None:
    shape = ",".join(f"{k}={v}" for k, v in params.items())
    try:
        definition.check(params, dtype)
    except InvalidShapeError as exc:
        raise UsageError(f"{where}: {definition.name} {shape} {dtype} is invalid: {exc}") from None
    except Exception as exc:  # the definition's own bug, reported as such rather than as ours
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(
            f"{where}: {definition.name}.check({shape}, {dtype}) raised {detail}; fix the kernel definition"
        ) from None


def _per_platform(
    spec: SweepSpec, ref: str, definition: KernelDefinition, params: dict[str, int], dtype: str
) -> list[Point]:
    return [
        Point(
            sweep=spec.name,
            kernel=definition.name,
            kernel_ref=ref,
            params=params,
            dtype=dtype,
            platform=platform,
            lnc=get_platform(platform).default_lnc,
            seed=spec.seed,
        )
        for platform in spec.platforms
    ]
