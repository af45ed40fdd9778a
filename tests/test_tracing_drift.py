"""Issue 18: the tracing adapters against the shapes AWS actually shipped, through the real trace worker.

Each stand-in root names its source in tests/fixtures/tools/python/README.md: `driver_tuple` is the
`(bir, cr)` driver awslabs/nki-autotune calls on trn2 hosts (2026-04..06), `driver_0700` NKI 0.7 as the
addendum's evidence has it, `sdk_2_27` NKI 0.1 with its shared_hbm reshape bug. The failures of
real-host audit 2 each have a test here: N1 (the pair), N2 (the compiler's words on fd 2), N7 (NKI 0.1),
the LNC variable and NKI 0.7's frontend; N5's timeout is in test_tracing.py, the published
signatures in test_sim_nki.py.
"""

from __future__ import annotations

import hashlib
import json
import logging

import numpy as np
import pytest
from standin_host import NEURON, POINT, call_count, installer, recorded, run

from kernelsweep.errors import CompileError, TraceError
from kernelsweep.kernels import load_kernel
from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.tracer import SIM_FRONTEND
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import tracing
from kernelsweep.toolchain.neff import read_neff

MLP = Point(
    sweep="t", kernel="mlp", kernel_ref="kernelsweep.kernels.mlp:mlp", params={"b": 1, "s": 128, "h": 256, "i": 256},
    dtype="bfloat16", platform="trn2", lnc=2, seed=3,
)  # fmt: skip


@pytest.fixture
def host(monkeypatch, tmp_path):
    return installer(monkeypatch, tmp_path)


def zeros(shape: list[int]) -> dict:
    """How a stand-in records a zero bfloat16 array of this shape."""
    array = np.zeros(shape, dtype=load_kernel(POINT.kernel_ref).build_inputs(POINT.params, "bfloat16", 0)["a"].dtype)
    return {"shape": shape, "dtype": "bfloat16", "sha256": hashlib.sha256(array.tobytes()).hexdigest()}


def test_the_bir_cr_pair_of_current_nki_is_unpacked_and_compiled_where_asked(host, tmp_path):
    """N1: `bir, cr = compile_to_bir(...)`, then zero arrays and the names from `cr` (nki-autotune)."""
    calls = host("driver_tuple")
    out = run(tmp_path / "work")
    assert (out.tracer, out.nki_version) == ("nki.compiler.driver", "0.4.0+standin")
    neff = recorded(calls)["compile_bir_to_neff"]
    assert neff["input_arrays"] == [zeros([4, 128, 8]), zeros([4, 128, 8])]
    assert (neff["input_names"], neff["output_names"]) == (["a", "b"], ["out"])
    assert neff["opts"]["output_path"] == str(tmp_path / "work" / "file.neff") == str(out.neff_path)
    assert read_neff(out.neff_path).outputs == ["out"] and out.fallbacks == ()
    assert json.loads(out.compile_options) == {"frontend": "ParserFrontend", "lnc": 2, "target": "trn2"}


def test_an_adapter_that_does_not_fit_falls_through_once_for_the_whole_run(host, tmp_path, monkeypatch, caplog):
    """A result shape no adapter knows is an AttributeError in the adapter, before the compiler ran:
    the point is traced by the next tracer, the run's later points start there, the log says so once
    and the rows' tracer column names the fallback."""
    monkeypatch.setenv("STANDIN_RESULT_SHAPE", "dict")
    calls = host("driver_tuple")
    choice = tracing.TracerChoice("nki.compiler.driver")
    with caplog.at_level(logging.WARNING, logger="kernelsweep.toolchain.tracing.job"):
        first = run(tmp_path / "one", choice=choice)
        second = run(tmp_path / "two", choice=choice)
    assert first.tracer == second.tracer == "nki.compiler.frontend"
    assert first.fallbacks == (
        tracing.Fallback("nki.compiler.driver", "AttributeError: 'dict' object has no attribute 'descriptor'"),
    )
    assert second.fallbacks == () and call_count(calls, "compile_to_bir") == 1  # never tried again
    assert choice.first == "nki.compiler.frontend" and choice.unusable == ["nki.compiler.driver"]
    label = tracing.tracer_label(first.tracer, choice.fell_through(first.tracer))
    assert label == "nki.compiler.frontend (fallback: nki.compiler.driver unusable)"
    warned = [r.getMessage() for r in caplog.records if "unusable" in r.getMessage()]
    assert len(warned) == 1 and "nki.compiler.driver" in warned[0] and "nki.compiler.frontend" in warned[0]
    assert read_neff(second.neff_path).outputs == ["out"]


def test_a_kernels_own_attribute_error_is_its_failure_not_a_fallback(host, tmp_path):
    host("driver_tuple")
    choice = tracing.TracerChoice("nki.compiler.driver")
    with pytest.raises(TraceError) as info:
        run(tmp_path / "work", kernel="standin_kernels:removed_api", choice=choice)
    assert info.value.error_class == "NkiApiMissing" and "par_dim" in info.value.message
    assert choice.unusable == [] and choice.first == "nki.compiler.driver"


@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "neuronx_cc_error"])
def test_the_compilers_words_on_fd_2_reach_the_row(host, tmp_path, monkeypatch, swallowed):
    """N2: the driver raises "Pass pipeline failed" (or returns `neuronx_cc_error`) and writes the
    diagnostic to the C-level stderr; the row's error says the diagnostic, classified."""
    monkeypatch.setenv("KERNELSWEEP_SIM_FAULTS", "compile-error=vector_add")
    if swallowed:
        monkeypatch.setenv("STANDIN_SWALLOW", "1")
    host("driver_tuple")
    with pytest.raises(CompileError) as info:
        run(tmp_path / "work")
    error = info.value
    assert (error.error_class, error.retryable) == ("CompilerDiagnostic", False)
    assert error.message.startswith("nki.compiler.driver: [NCC_EVRF009] Size of total input and output tensors")
    assert "--- compiler output (fd 2) ---" in error.stderr_tail and "Pass pipeline failed" in error.stderr_tail


def test_nki_0_1_of_sdk_2_27_cannot_reshape_the_mlps_shared_hbm_tensors(host, tmp_path):
    """N7: SDK 2.27 shipped NKI 0.1.0, whose shared_hbm reshape fails a partition size check (fixed in
    0.2.0); the MLP reshapes its input and output. vector_add does not, and traces there."""
    host("sdk_2_27")
    assert run(tmp_path / "add").nki_version == "0.1.0+standin"
    with pytest.raises(TraceError) as info:
        run(tmp_path / "mlp", MLP)
    assert info.value.retryable is False and info.value.message.startswith("neuronxcc.nki_standalone: ValueError")
    assert "reshape of a shared_hbm tensor (1, 128, 256) into (128, 256) fails the partition size check" in str(
        info.value
    )


@pytest.mark.parametrize("inherited", [None, "1"])
def test_the_worker_gives_nki_0_7_the_points_lnc(host, tmp_path, monkeypatch, inherited):
    """NKI 0.7 takes a kernel's LNC from NEURON_LOGICAL_NC_CONFIG (default 1) and rejects a kernel/compiler
    mismatch (NCC_EVRF066); a DLAMI container may export another value globally."""
    if inherited:
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", inherited)
    calls = host("driver_0700")
    out = run(tmp_path / "work")  # POINT: trn2 at LNC=2
    assert recorded(calls)["compile_to_bir"]["env"]["NEURON_LOGICAL_NC_CONFIG"] == "2"
    assert read_neff(out.neff_path).info["num_tpb"] == 2


def test_nki_0_7_traces_with_the_python_tracing_frontend_and_records_the_setting(host, tmp_path, monkeypatch):
    calls = host("driver_0700")
    out = run(tmp_path / "tracing")
    assert out.tracer == "nki.compiler.driver/tracer-frontend" and out.nki_compiler_frontend is None
    assert recorded(calls)["compile_to_bir"]["frontend"] == "TracerFrontend"
    assert json.loads(out.compile_options)["frontend"] == "TracerFrontend"
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")  # 2.33's escape hatch to the old specialization
    old = run(tmp_path / "custom")
    assert (old.tracer, old.nki_compiler_frontend) == ("nki.compiler.driver", "custom")
    assert recorded(calls)["compile_to_bir"]["frontend"] == "ParserFrontend"
    probed = tracing.probe(NEURON, tmp_path / "probe")
    assert probed.nki_compiler_frontend == "custom"  # what the cache keys take, before any trace


def test_the_simulated_nki_0_7_refuses_a_kernel_lnc_the_compiler_does_not_use(tmp_path, monkeypatch, capfd):
    """The simulator's 0.7 generation, in process: the kernel at LNC 1 (the variable unset), the compile
    at 2: "Pass pipeline failed", and NCC_EVRF066 on fd 2, as the real driver reports it."""
    monkeypatch.setenv("KERNELSWEEP_SIM_NKI", "0.7")
    monkeypatch.delenv("NEURON_LOGICAL_NC_CONFIG", raising=False)
    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))
    request = tracing.TraceRequest.for_point(POINT, load_kernel(POINT.kernel_ref), "trn2")
    api = SIM_FRONTEND.load()
    assert SimConfig.from_env().nki == api.generation.name == "0.7"
    with pytest.raises(RuntimeError, match="Pass pipeline failed"):
        SIM_FRONTEND.run(api, request, tmp_path)
    said = capfd.readouterr().err
    assert "[NCC_EVRF066] NKI kernel 'vector_add' is configured with LNC=1, but neuronx-cc is using LNC=2" in said
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    (tmp_path / "ir").rename(tmp_path / "ir-refused")
    assert SIM_FRONTEND.run(api, request, tmp_path).neff is not None
