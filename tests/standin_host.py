"""The stand-in SDK roots (tests/fixtures/tools/python) as the tracing tests install them, and what
they recorded: one sys.path root per generation, calls written as JSON lines by the stand-ins (they
run in the trace worker, a separate process)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelsweep.kernels import load_kernel
from kernelsweep.kernels.vector_add import VectorAdd
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import tracing
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.tracing import tracers as nki_tracers

STAND_INS = Path(__file__).parent / "fixtures" / "tools" / "python"
NEURON = Toolchain(kind="neuron", commands={}, tracers=nki_tracers.TRACERS)
POINT = Point(
    sweep="t", kernel="vector_add", kernel_ref="kernelsweep.kernels.vector_add:vector_add",
    params={"n": 4096, "partition_size": 128, "free_size": 8}, dtype="bfloat16", platform="trn2", lnc=2, seed=7,
)  # fmt: skip


def definition(kernel: str | None = None) -> VectorAdd:
    """The builtin vector_add, or one pointing at another NKI kernel function."""
    return VectorAdd() if kernel is None else type("StandIn", (VectorAdd,), {"nki_kernel": kernel})()


def installer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Path]:
    """Install stand-in roots (as if pip-installed) for the worker, and record their calls."""
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("STANDIN_CALLS", str(calls))
    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))

    def install(*roots: str) -> Path:
        for root in ("kernels", *roots):
            monkeypatch.syspath_prepend(str(STAND_INS / root))
        return calls

    return install


def recorded(calls: Path) -> dict[str, dict]:
    """Each call's arguments (the last call of each name)."""
    return {c["call"]: c["arguments"] for c in map(json.loads, calls.read_text().splitlines())}


def call_count(calls: Path, name: str) -> int:
    return sum(1 for c in map(json.loads, calls.read_text().splitlines()) if c["call"] == name)


def run(
    workdir: Path, point: Point = POINT, kernel: str | None = None, toolchain: Toolchain = NEURON, **options
) -> tracing.TraceOutput:
    chosen = load_kernel(point.kernel_ref) if kernel is None else definition(kernel)
    request = tracing.TraceRequest.for_point(point, chosen, point.platform)
    tracer, timeout = options.pop("tracer", None), options.pop("timeout", 120)
    return tracing.trace(toolchain, request, workdir, tracer=tracer, timeout_seconds=timeout, **options)
