"""Tracing a kernel: the step that turns an NKI kernel into the IR a compiler takes, and on current
SDKs into the NEFF itself.

NKI's tracing APIs are semi-internal and changed twice in 2026 (reference Corrections 1), so a
toolchain carries several `Tracer`s, one per API generation, and the first whose API loads AND
whose signatures fit (probed with `inspect.signature`, never by import success alone) is used. Like
AWS's own harness, tracing and compiling never run in the sweep's process: each point is traced in
a spawned worker process (kernelsweep.toolchain.tracing.worker) with a timeout, so one compiler crash
or hang costs one point, process-global tracer state is never shared between points, and importing
the SDK never touches the runtime the sweep's captures use. The caller bounds the workers with the
compile slots.

Tracers are handed to the worker by import reference (`Tracer.ref`); the real ones live in
kernelsweep.toolchain.tracing.tracers, the simulator's in kernelsweep.sim.tracer.
"""

from __future__ import annotations

import json
import sys
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from kernelsweep.errors import CompileError, KernelsweepError, TraceError

if TYPE_CHECKING:
    from kernelsweep.kernels import KernelDefinition
    from kernelsweep.spec import Point
    from kernelsweep.toolchain.resolve import Toolchain

WORKER = "kernelsweep.toolchain.tracing.worker"
JOB_FILE, RESULT_FILE = "trace-job.json", "trace-result.json"
PROBE_TIMEOUT_SECONDS = 120.0
# Removed from the worker's environment: the compile workers of awslabs/nki-autotune drop it too, so
# that importing the SDK cannot claim the NeuronCores a concurrent capture holds.
WORKER_UNSET = ("NEURON_RT_VISIBLE_CORES",)


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
        )


@dataclass(frozen=True)
class TraceProducts:
    """What a tracer's run leaves in its work folder (inside the worker)."""

    ir_dir: Path  # everything the tracer wrote for the compiler or as artifacts; stored as one tar
    neff: Path | None  # set when the API compiled too
    compile_seconds: float | None = None


@dataclass(frozen=True)
class Tracer:
    name: str
    ref: str  # "module:attribute" the worker imports this Tracer by
    load: Callable[[], SimpleNamespace]  # imports the API and probes its signatures; raises if absent or unfit
    run: Callable[[SimpleNamespace, TraceRequest, Path], TraceProducts]
    best_effort: bool = False  # no public code confirms this API: results are a best effort


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

    @property
    def selected(self) -> TracerStatus | None:
        return next((s for s in self.statuses if s.available), None)

    def describe_failures(self) -> str:
        return "; ".join(f"{s.name} ({s.reason})" for s in self.statuses)


@dataclass(frozen=True)
class TraceOutput:
    ir_path: Path  # the IR folder as one reproducible tar
    tracer: str  # tracer id
    nki_version: str | None
    neff_path: Path | None = None
    trace_seconds: float = 0.0
    compile_seconds: float | None = None
    notes: tuple[str, ...] = field(default=())


def probe(
    toolchain: Toolchain, timeout_seconds: float = PROBE_TIMEOUT_SECONDS, check_runtime_at_lnc: int | None = None
) -> TracerProbe:
    """Ask a worker which of the toolchain's tracers this host can run (no kernel is traced); with
    `check_runtime_at_lnc`, also whether importing them made the worker hold a device (neuron-ls
    run at that LNC, as every listing is)."""
    job: dict[str, Any] = {"mode": "probe"}
    if check_runtime_at_lnc is not None and "neuron-ls" in toolchain.commands:
        job["neuron_ls"] = toolchain.command("neuron-ls") + ["-j"]
        job["neuron_ls_env"] = {"NEURON_LOGICAL_NC_CONFIG": str(check_runtime_at_lnc)}
    import tempfile  # deferred: the trace worker imports this module and never probes

    with tempfile.TemporaryDirectory(prefix="kernelsweep-probe-") as tmp:
        result = _run_worker(toolchain, Path(tmp), job, timeout_seconds, "probing tracers")
    return TracerProbe(tuple(TracerStatus(**s) for s in result["statuses"]), result.get("holds_device"))


def trace(
    toolchain: Toolchain, request: TraceRequest, workdir: Path, *, tracer: str | None, timeout_seconds: float
) -> TraceOutput:
    """Trace (and, where the API does, compile) one point in a worker; `tracer` pins the probed choice."""
    job = {"mode": "trace", "tracer": tracer, "request": request.as_json()}
    env = {"NEURON_PLATFORM_TARGET_OVERRIDE": request.target}  # NKI 0.3+ takes the target from here
    result = _run_worker(toolchain, workdir, job, timeout_seconds, f"tracing {request.nki_kernel}", env)
    return TraceOutput(
        ir_path=workdir / result["ir"],
        tracer=result["tracer"],
        nki_version=result["nki_version"],
        neff_path=workdir / result["neff"] if result["neff"] else None,
        trace_seconds=result["trace_seconds"],
        compile_seconds=result["compile_seconds"],
        notes=tuple(result.get("notes", ())),
    )


def _run_worker(
    toolchain: Toolchain,
    workdir: Path,
    job: dict[str, Any],
    timeout_seconds: float,
    what: str,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    from kernelsweep.toolchain.process import run_tool  # deferred: the worker imports this module, never runs tools

    workdir.mkdir(parents=True, exist_ok=True)
    job = {**job, "tracers": [t.ref for t in toolchain.tracers], "sys_path": [p for p in sys.path if p]}
    (workdir / JOB_FILE).write_text(json.dumps(job))
    argv = [sys.executable, "-P", "-m", WORKER, str(workdir / JOB_FILE)]
    result = run_tool(
        argv,
        cwd=workdir,
        env={**toolchain.env, **(env or {})},
        unset=WORKER_UNSET,
        timeout_seconds=timeout_seconds,
    )
    if result.timed_out:
        raise TraceError(
            f"{what} timed out after {timeout_seconds:g} s", error_class="Timeout", retryable=True, argv=argv,
            stderr_tail=result.output,
        )  # fmt: skip
    answer = workdir / RESULT_FILE
    if not answer.is_file():
        lines = [line for line in result.output.splitlines() if line.strip()]
        raise TraceError(
            f"{what}: the trace worker died (exit {result.returncode}): {lines[-1] if lines else 'no output'}",
            error_class="TracerCrash",
            argv=argv,
            returncode=result.returncode,
            stderr_tail=result.output,
        )
    data = json.loads(answer.read_text())
    if "error" in data:
        raise _rebuild(data["error"], argv)
    return data


_ERROR_TYPES: dict[str, type[KernelsweepError]] = {"TraceError": TraceError, "CompileError": CompileError}


def _rebuild(error: Mapping[str, Any], argv: list[str]) -> KernelsweepError:
    """The worker's error, as the error type the stage reports (a tracer that compiles can fail compiling)."""
    error_type = _ERROR_TYPES.get(error["type"], TraceError)
    return error_type(
        error["message"],
        retryable=error["retryable"],
        error_class=error["error_class"],
        argv=argv,
        stderr_tail=error.get("stderr_tail"),
    )


def pack(folder: Path, archive: Path) -> Path:
    """One reproducible file for the artifact store: sorted names, no times or owners."""

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with tarfile.open(archive, "w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False, filter=normalise)
    return archive


def unpack(archive: Path, folder: Path) -> Path:
    """The IR folder back from its tar (the compile stage's input)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder
