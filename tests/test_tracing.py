"""Tracer selection and argument mapping, against stand-in NKI generations (tests/fixtures/tools/python).

The real tracers cannot run here; the stand-ins take the real APIs' arguments, record them and
write what the real API writes, so these tests pin down which generation is chosen and exactly
what each adapter passes.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from kernelsweep.dtypes import numpy_dtype
from kernelsweep.errors import CompileError, TraceError
from kernelsweep.kernels.vector_add import VectorAdd
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.spec import Point
from kernelsweep.toolchain import tracing
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.versions import SDK_PACKAGES, package_version

STAND_INS = Path(__file__).parent / "fixtures" / "tools" / "python"
NEURON = Toolchain(kind="neuron", commands={}, tracers=tracing.TRACERS)
POINT = Point(
    sweep="t", kernel="vector_add", kernel_ref="kernelsweep.kernels.vector_add:vector_add",
    params={"n": 4096, "partition_size": 128, "free_size": 32}, dtype="bfloat16", platform="trn2", lnc=2, seed=7,
)  # fmt: skip


def definition(function: str) -> VectorAdd:
    """The builtin vector_add, pointing at a stand-in NKI kernel function."""
    return type("StandIn", (VectorAdd,), {"nki_kernel": f"standin_kernels:{function}"})()


@pytest.fixture
def installed(monkeypatch):
    """Put stand-in generations on sys.path, as if installed; forgets every import afterwards."""

    def forget():
        for name in [m for m in sys.modules if m.split(".")[0] in ("nki", "neuronxcc", "standin_kernels")]:
            del sys.modules[name]

    def install(*roots: str) -> None:
        forget()
        for root in ("kernels", *roots):
            monkeypatch.syspath_prepend(str(STAND_INS / root))

    yield install
    forget()


def calls(package: str) -> dict[str, dict]:
    return dict(sys.modules[package].CALLS)


def expected_inputs() -> dict[str, np.ndarray]:
    return definition("vector_add_kernel").build_inputs(POINT.params, POINT.dtype, POINT.seed)


def test_frontend_traces_and_compiles_with_the_verified_recipe(installed, tmp_path):
    installed("frontend")
    out = tracing.trace(NEURON, POINT, definition("vector_add_kernel"), tmp_path)
    assert out.tracer == "nki.compiler.frontend"
    recorded = calls("nki")
    compiled = recorded["TracerFrontend.compile"]
    assert compiled["ctx"] is recorded["nki_ir_context"]["ctx"]
    assert compiled["kernel"] is sys.modules["standin_kernels"].vector_add_kernel  # the @nki.jit object itself
    assert list(compiled["inputs"]) == ["a", "b"]  # bound in the kernel's parameter order
    for name, array in expected_inputs().items():
        assert compiled["inputs"][name].dtype == numpy_dtype("bfloat16")
        np.testing.assert_array_equal(compiled["inputs"][name], array)
    assert (compiled["target"], compiled["lnc"]) == ("trn2", 2)
    assert compiled["artifacts_dir"] == str(tmp_path / "nki_artifacts")
    options = recorded["CompiledKernel.from_frontend"]["options"]
    assert (options.target, options.lnc, options.output_path) == ("trn2", 2, str(tmp_path / "file.neff"))
    assert options.artifacts_dir == compiled["artifacts_dir"]
    assert out.neff_path == tmp_path / "file.neff" and out.neff_path.read_bytes().startswith(b"stand-in NEFF")
    with tarfile.open(out.ir_path) as tar:  # the IR artifact: the artifacts folder as one reproducible file
        assert [(m.name, m.mtime, m.uid) for m in tar.getmembers()] == [("kernel.mlir", 0, 0)]


def test_standalone_traces_to_penguin_for_the_compiler(installed, tmp_path):
    installed("standalone")
    out = tracing.trace(NEURON, POINT, definition("vector_add_kernel"), tmp_path)
    assert out.tracer == "neuronxcc.nki_standalone" and out.neff_path is None
    assert out.ir_path == tmp_path / "tensorizer_ir" / "penguin.py" and out.ir_path.is_file()
    recorded = calls("neuronxcc")
    traced = recorded["_compile_nki_ir_to_tensorizer_ir"]
    assert (traced["platform_target"], traced["logical_nc_config"]) == ("trn2", 2)
    assert traced["version"].name == "beta2"
    assert sorted(traced["kernel_inputs_dict"]) == ["a", "b"]
    assert traced["kernel_outputs"] == [tracing.TensorStub((4096,), numpy_dtype("bfloat16"), "out")]
    assert recorded["_write_tensorizer_ir"]["output_directory"] == str(tmp_path / "tensorizer_ir")


def test_legacy_runs_seed_000s_steps(installed, tmp_path):
    installed("legacy")
    out = tracing.trace(
        NEURON, POINT.model_copy(update={"platform": "trn1", "lnc": 1}), definition("vector_add_kernel"), tmp_path
    )
    assert out.tracer == "legacy-penguin" and out.neff_path is None
    assert out.ir_path == tmp_path / "penguin.py" and "tensors ['a', 'b']" in out.ir_path.read_text()
    recorded = sys.modules["neuronxcc"].CALLS
    steps = [name for name, _ in recorded]
    assert steps == ["IRBuilder.tensor", "IRBuilder.tensor", "TraceKernel.trace", "traced_kernel", "IRWriter.run"]
    assert recorded[0][1] == {"shape": (4096,), "dtype": numpy_dtype("bfloat16"), "name": "a"}
    assert recorded[2][1]["platform_target"] == "trn1"
    assert recorded[3][1]["lnc"] == 1 and sorted(recorded[3][1]["inputs"]) == ["a", "b"]
    writer = recorded[4][1]
    assert writer["save_weights"] is True and writer["weights_dir"] == str(tmp_path / "weights")
    assert writer["output"].name == str(out.ir_path)  # IRWriter writes into the open penguin.py


def test_the_newest_importable_generation_wins(installed, tmp_path):
    installed("legacy", "standalone", "frontend")
    assert [t.name for t, api, _ in tracing.probe_tracers() if api is not None] == [
        "nki.compiler.frontend",
        "neuronxcc.nki_standalone",
    ]  # fmt: skip - the legacy stand-in's neuronxcc is shadowed by the standalone one
    assert tracing.trace(NEURON, POINT, definition("vector_add_kernel"), tmp_path).tracer == "nki.compiler.frontend"


@pytest.mark.skipif(
    any(package_version(name).version for name in SDK_PACKAGES), reason="this host has Neuron SDK packages"
)
def test_no_tracer_names_what_is_installed(installed, tmp_path):
    installed()
    with pytest.raises(TraceError) as info:
        tracing.trace(NEURON, POINT, definition("vector_add_kernel"), tmp_path)
    error = info.value
    assert error.error_class == "TracerUnavailable" and error.retryable is False
    assert "nki.compiler.frontend (ModuleNotFoundError: No module named 'nki')" in error.message
    assert "installed: neuronx-cc not installed, nki not installed" in error.message
    assert "--toolchain sim" in error.message


def test_pypi_placeholders_are_named_as_placeholders(installed, tmp_path):
    installed("placeholder")
    with pytest.raises(TraceError) as info:
        tracing.trace(NEURON, POINT, definition("vector_add_kernel"), tmp_path)
    message = info.value.message
    assert "ImportError: WRONG PACKAGE" in message  # the placeholder's own import error
    assert "neuronx-cc 1.0.post1 (PyPI placeholder, not the Neuron SDK)" in message
    assert "nki 0.0.1 (PyPI placeholder, not the Neuron SDK)" in message


@pytest.mark.parametrize("root", ["frontend", "standalone", "legacy"])
def test_kernel_errors_raised_while_tracing_are_classified(installed, tmp_path, root):
    installed(root)
    with pytest.raises(TraceError) as info:
        tracing.trace(NEURON, POINT, definition("too_many_partitions"), tmp_path)
    assert info.value.error_class == "KernelConstraint" and info.value.retryable is False
    assert "number of partitions 256 exceed architecture limitation of 128" in info.value.message


def test_compiler_errors_from_an_in_process_compile_are_compile_errors(installed, tmp_path):
    installed("frontend")
    with pytest.raises(CompileError) as info:
        tracing.trace(NEURON, POINT, definition("out_of_hbm"), tmp_path)
    assert info.value.error_class == "CompilerDiagnostic" and "[NCC_EOOM002]" in info.value.message


def test_kernel_parameters_must_match_the_definitions_inputs(installed, tmp_path):
    installed("frontend")
    with pytest.raises(TraceError) as info:
        tracing.trace(NEURON, POINT, definition("wrong_names"), tmp_path)
    assert info.value.error_class == "KernelSignature"
    assert "wrong_names(x, y)" in info.value.message and "['a', 'b']" in info.value.message


def test_a_missing_nki_kernel_is_a_clear_trace_error(installed, tmp_path):
    installed("frontend")
    with pytest.raises(TraceError) as info:
        tracing.trace(NEURON, POINT, definition("no_such_kernel"), tmp_path)
    assert info.value.error_class == "KernelImport" and "standin_kernels:no_such_kernel" in info.value.message


def test_the_simulated_tracer_fails_at_trace_time_in_nkis_words(tmp_path):
    """Points past a kernel's limits fail before the compiler, as with the real NKI tracer (seed 004)."""
    too_wide = POINT.model_copy(update={"params": {"n": 4096, "partition_size": 256, "free_size": 16}})
    with pytest.raises(TraceError) as info:
        tracing.trace(sim_toolchain(tmp_path), too_wide, VectorAdd(), tmp_path)
    assert info.value.error_class == "KernelConstraint" and info.value.retryable is False
    assert info.value.message.startswith(
        "sim-penguin: ValueError: number of partitions 256 exceed architecture limitation of 128. Info on how to fix:"
    )
    ragged = POINT.model_copy(update={"params": {"n": 4000, "partition_size": 128, "free_size": 32}})
    with pytest.raises(TraceError, match="n=4000 is not a whole number of 128x32 tiles") as info:
        tracing.trace(sim_toolchain(tmp_path), ragged, VectorAdd(), tmp_path)
    assert info.value.error_class == "TraceError"


def test_the_simulated_tracer_writes_penguin_py(tmp_path):
    out = tracing.trace(sim_toolchain(tmp_path), POINT, VectorAdd(), tmp_path)
    assert (out.tracer, out.ir_path.name, out.neff_path) == ("sim-penguin", "penguin.py", None)
