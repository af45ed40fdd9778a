"""Issue 33, R1: the compile route AWS documents for NKI 0.7 (NKI_ARTIFACTS_DIR before `import nki`,
the `@nki.jit` kernel called with NumPy arrays, the NEFF kept at kernel.neff), as the last resort.

The `jit_artifacts` stand-in mirrors AWS's nrtpy tutorial: it has no compile API but `nki.jit`,
reads the folder at import, compiles and then executes, and keeps the NEFF when execution fails. The
route executes the kernel, so it runs in a worker of its own holding a core lease from the sweep's
real leaser, which the stand-in checks from its side of the process boundary.
"""

from __future__ import annotations

import json

import pytest
from standin_host import NEURON, POINT, installer, recorded, run

from kernelsweep.errors import TraceError
from kernelsweep.locks import CoreLeaser
from kernelsweep.stages import trace_stage
from kernelsweep.stores.artifacts import LocalArtifactStore
from kernelsweep.sweepspec.models import CaptureSettings
from kernelsweep.this_host.context import StageContext
from kernelsweep.toolchain import tracing
from kernelsweep.toolchain.neff import read_neff
from kernelsweep.toolchain.packages import SDK_PACKAGES, package_version
from kernelsweep.toolchain.tracing.artifacts import ARTIFACTS_FOLDER
from kernelsweep.toolchain.versions import collect

COMPILING = ["nki.compiler.driver", "nki.compiler.frontend", "neuronxcc.nki_standalone", "legacy-penguin"]


@pytest.fixture
def host(monkeypatch, tmp_path):
    return installer(monkeypatch, tmp_path)


@pytest.fixture
def leaser(tmp_path, monkeypatch):
    """The sweep's own leaser (LNC=2, POINT's), its lock folder told to the stand-in."""
    monkeypatch.setenv("STANDIN_LOCK_DIR", str(tmp_path / "locks"))
    return CoreLeaser(tmp_path / "locks", [0, 1], lnc=2)


def test_the_artifacts_route_traces_when_no_other_tracer_fits_holding_a_core(host, tmp_path, leaser):
    calls = host("jit_artifacts")
    choice = tracing.TracerChoice("nki.compiler.driver")  # as if a probe had found the driver
    out = run(tmp_path / "one", choice=choice, lease=leaser.lease)
    assert (out.tracer, out.nki_version) == ("nki.jit/artifacts", "0.7.0+standin")
    call = recorded(calls)["nki.jit call"]
    assert call["lease_held"] is True and call["visible_cores"] == "0"  # the leased core, held while it ran
    assert call["artifacts_dir"] == str(tmp_path / "one" / ARTIFACTS_FOLDER)  # read at import: set before it
    assert [a["shape"] for a in call["arrays"]] == [[4, 128, 8], [4, 128, 8]]  # numpy arrays, tensors alone
    assert read_neff(out.neff_path).outputs == ["output_0"]  # no names given: mapped back by position
    assert json.loads(out.compile_options)["execution"] == "ok"
    assert leaser.try_acquire() is not None  # released once the worker ended
    label = tracing.tracer_label(out.tracer, choice.fell_through(out.tracer))
    assert label == f"nki.jit/artifacts (fallback: {', '.join(COMPILING)} unusable)"
    assert choice.first == "nki.jit/artifacts"  # the run's later points go straight to it
    assert run(tmp_path / "two", choice=choice, lease=leaser.lease).fallbacks == ()


def test_the_neff_is_kept_when_execution_fails(host, tmp_path, leaser, monkeypatch):
    monkeypatch.setenv("STANDIN_EXEC_FAIL", "1")
    host("jit_artifacts")
    out = run(tmp_path / "work", lease=leaser.lease)
    assert out.neff_path is not None and read_neff(out.neff_path).info["num_tpb"] == 2
    execution = json.loads(out.compile_options)["execution"]
    assert execution == "RuntimeError: NRT Error NRT_EXEC_OOB(1006): stand-in execution failure"


def test_without_a_lease_the_executing_route_is_not_tried(host, tmp_path):
    calls = host("jit_artifacts")
    with pytest.raises(TraceError) as info:
        run(tmp_path / "work")
    assert info.value.error_class == "TracerUnavailable"
    assert not calls.exists() or "nki.jit call" not in recorded(calls)


def test_a_usable_compiling_tracer_wins_over_the_executing_route(host, tmp_path, leaser):
    calls = host("jit_artifacts", "driver_0700")  # driver_0700 prepended last: its nki is found first
    out = run(tmp_path / "work", lease=leaser.lease)
    assert out.tracer == "nki.compiler.driver/tracer-frontend" and "nki.jit call" not in recorded(calls)


def test_the_row_names_the_route_and_the_stage_leases_the_points_core(host, tmp_path, leaser):
    calls = host("jit_artifacts")
    toolchain = NEURON
    ctx = StageContext(
        toolchain=toolchain,
        store=LocalArtifactStore(tmp_path / "artifacts"),
        capture=CaptureSettings(),
        leasers={2: leaser},
        compile_slots=1,
        versions=collect(toolchain, tmp_path),
    )
    assert ctx.versions.tracer == "nki.jit/artifacts"  # the probe found nothing else
    traced = trace_stage(ctx, POINT)
    assert tracing.tracer_label(traced.tracer, traced.fell_through) == "nki.jit/artifacts"
    assert recorded(calls)["nki.jit call"]["lease_held"] is True and traced.neff is not None


@pytest.mark.skipif(any(package_version(n).version for n in SDK_PACKAGES), reason="this host has Neuron SDK packages")
def test_when_the_last_resort_is_unusable_too_the_error_names_every_tracer(host, tmp_path, leaser):
    host()  # no SDK at all
    with pytest.raises(TraceError) as info:
        run(tmp_path / "work", lease=leaser.lease)
    message = info.value.message
    assert info.value.error_class == "TracerUnavailable"
    assert "nki.compiler.driver (ModuleNotFoundError: No module named 'nki')" in message
    assert "Then: no NKI tracing API is usable: tried nki.jit/artifacts (ModuleNotFoundError" in message
