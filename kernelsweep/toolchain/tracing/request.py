"""What a trace worker is given and what it hands back: plain data that crosses the process (and
interpreter) boundary as JSON, and the IR folder packed as one reproducible file.

Everything here is imported by the trace worker, which runs under the Neuron SDK's own interpreter
(Python 3.10 and up, numpy and the SDK only: kernelsweep.toolchain.tracing.interpreter).
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelsweep.kernels import KernelDefinition
    from kernelsweep.sweepspec.point import Point

RESULT_FILE = "trace-result.json"  # what the worker writes beside its job file


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class TraceRequest:
    """Everything a tracer needs for one point, as plain data the worker rebuilds the kernel from."""

    kernel_ref: str  # the KernelDefinition, module:attribute
    nki_kernel: str  # the NKI kernel function, module:attribute
    params: dict[str, int]
    dtype: str
    platform: str
    target: str  # the compiler target (trn1, inf2, trn2)
    lnc: int
    seed: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # What the adapter passes as the API's `output_names`; without them a frontend NEFF names its
    # outputs output_0, output_1, ... (reference Corrections 1). Production always passes them.
    output_names: tuple[str, ...] | None
    # The kernel's tunables at this point: parameters of the NKI kernel that are bound into it as
    # constants before tracing, never handed to the compiler as inputs (tracing.binding).
    tunables: dict[str, int | str] = field(default_factory=dict)

    @classmethod
    def for_point(cls, point: Point, definition: KernelDefinition, target: str) -> TraceRequest:
        outputs = tuple(
            TensorSpec(t.name, t.shape, t.dtype) for t in definition.output_infos(point.params, point.dtype)
        )
        return cls(
            kernel_ref=point.kernel_ref,
            nki_kernel=definition.nki_kernel,
            params=dict(point.params),
            dtype=point.dtype,
            platform=point.platform,
            target=target,
            lnc=point.lnc,
            seed=point.seed,
            inputs=tuple(
                TensorSpec(t.name, t.shape, t.dtype) for t in definition.input_infos(point.params, point.dtype)
            ),
            outputs=outputs,
            output_names=tuple(t.name for t in outputs),
            tunables=dict(point.tunables),
        )

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TraceRequest:
        def specs(items: list[dict[str, Any]]) -> tuple[TensorSpec, ...]:
            return tuple(TensorSpec(t["name"], tuple(t["shape"]), t["dtype"]) for t in items)

        names = data["output_names"]
        return cls(
            **{
                k: data[k] for k in ("kernel_ref", "nki_kernel", "params", "dtype", "platform", "target", "lnc", "seed")
            },
            inputs=specs(data["inputs"]),
            outputs=specs(data["outputs"]),
            output_names=None if names is None else tuple(names),
            tunables=dict(data.get("tunables") or {}),
        )


@dataclass(frozen=True)
class TraceProducts:
    """What a tracer's run leaves in its work folder (inside the worker)."""

    ir_dir: Path  # everything the tracer wrote for the compiler or as artifacts; stored as one tar
    neff: Path | None  # set when the API compiled too
    compile_seconds: float | None = None
    # What the adapter asked the compiler for, without paths (rows record it: numbers depend on it)
    compile_options: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Tracer:
    name: str
    ref: str  # "module:attribute" the worker imports this Tracer by
    load: Callable[[], SimpleNamespace]  # imports the API and probes its signatures; raises if absent or unfit
    run: Callable[[SimpleNamespace, TraceRequest, Path], TraceProducts]
    best_effort: bool = False  # no public code confirms this API: results are a best effort
    # The route runs the kernel on a NeuronCore (nki.jit with NumPy arrays): tried last, in a worker
    # of its own that holds the point's core lease (kernelsweep.toolchain.tracing.artifacts)
    executes: bool = False


@dataclass(frozen=True)
class TracerStatus:
    """One tracer as the worker found it on this host."""

    name: str
    available: bool
    variant: str = ""  # which signature variant fits, "" for the documented one
    nki_version: str | None = None
    reason: str = ""  # why it is unavailable
    best_effort: bool = False
    signatures: str = ""  # the probed API's signatures, for a bug report

    @property
    def tracer_id(self) -> str:
        """What rows and cache keys record: the tracer and, if not the documented one, its variant."""
        return f"{self.name}/{self.variant}" if self.variant else self.name


@dataclass(frozen=True)
class TracerProbe:
    statuses: tuple[TracerStatus, ...]
    # Whether the worker, having imported the SDK, showed up as a NeuronCore holder in `neuron-ls`
    # (None: not asked). nki-autotune keeps the visible cores from its compile workers, as if it could.
    holds_device: bool | None = None
    nki_compiler_frontend: str | None = None  # NKI_COMPILER_FRONTEND as the worker saw it (None: unset)
    packages: Mapping[str, str] = field(default_factory=dict)  # the SDK's packages in the worker's interpreter
    python: str = ""  # the worker's interpreter and its version

    @property
    def selected(self) -> TracerStatus | None:
        return next((s for s in self.statuses if s.available), None)

    def describe_failures(self) -> str:
        return "; ".join(f"{s.name} ({s.reason})" for s in self.statuses)


@dataclass(frozen=True)
class Fallback:
    """A tracer whose adapter did not fit this host's API (a TypeError or AttributeError in the
    adapter itself, before the compiler ran): unusable for the rest of the run."""

    tracer: str  # the tracer id that failed
    reason: str  # the error, one line


@dataclass(frozen=True)
class TraceOutput:
    ir_path: Path  # the IR folder as one reproducible tar
    tracer: str  # tracer id
    nki_version: str | None
    neff_path: Path | None = None
    trace_seconds: float = 0.0
    compile_seconds: float | None = None
    fallbacks: tuple[Fallback, ...] = ()  # tracers found unusable while tracing this point
    compile_options: str | None = None  # JSON, sorted keys
    nki_compiler_frontend: str | None = None  # NKI_COMPILER_FRONTEND as the worker ran (None: unset)
    # `--toolchain cpu`: the outputs the installed NKI's nki.simulate computed, as raw .bin files,
    # or why there are none
    simulated_outputs: Mapping[str, Path] = field(default_factory=dict)
    simulate_note: str | None = None
    # the tracing-and-compiling call's cost as the worker measured it (kernelsweep.toolchain.compile_cost):
    # {"peak_rss_bytes", "cpu_seconds", "memory_limit_bytes"}
    compile_cost: Mapping[str, Any] | None = None
    # the worker's wall time from its go (kernelsweep.toolchain.process.Slots) to its exit: not its
    # start-up, which overlapped the wait for a compile slot
    worker_seconds: float = 0.0
    # NKI's allocator fell back to neuronx-cc's in the compile (its words on fd 2); None: no compile here
    alloc_fallback: bool | None = None


def pack(folder: Path, archive: Path) -> Path:
    """One reproducible file for the artifact store: sorted names, no times or owners."""

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with tarfile.open(archive, "w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False, filter=normalise)
    return archive
