"""The real tracing adapters in their worker process, against stand-in NKI generations
(tests/fixtures/tools/python), one per documented API and signature variant.

The stand-ins take the real APIs' arguments, record each call (as JSON lines, since the tracer runs
in the trace worker, a separate process), and compile what they are handed on the simulated NKI
language, so the built-in kernels' real source is traced and the NEFF the simulated runtime runs is
written, with the output names the real frontends give.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest
from standin_host import NEURON, POINT, definition, installer, recorded
from standin_host import run as run_in

from kernelsweep.errors import CompileError, TraceError
from kernelsweep.kernels.vector_add import VectorAdd
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import compiler, tracing
from kernelsweep.toolchain.neff import read_neff
from kernelsweep.toolchain.packages import SDK_PACKAGES, package_version
from kernelsweep.toolchain.profiler import outputs_by_kernel_name

BUILTIN_KERNEL = "kernelsweep.kernels.nki.vector_add:vector_add_kernel"


@pytest.fixture
def host(monkeypatch, tmp_path):
    return installer(monkeypatch, tmp_path)


def run(tmp_path: Path, point: Point = POINT, kernel: str | None = None, **options) -> tracing.TraceOutput:
    return run_in(tmp_path / "work", point, kernel, **options)


def expected_inputs() -> dict[str, dict]:
    arrays = definition().build_inputs(POINT.params, POINT.dtype, POINT.seed)
    return {
        n: {"shape": list(a.shape), "dtype": "bfloat16", "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
        for n, a in arrays.items()
    }


def test_driver_route_passes_output_names_and_takes_the_neff_where_it_asked(host, tmp_path):
    calls = host("driver_0606")
    out = run(tmp_path)
    assert (out.tracer, out.nki_version) == ("nki.compiler.driver", "0.6.0+standin")
    work = tmp_path / "work"
    bir, neff = recorded(calls)["compile_to_bir"], recorded(calls)["compile_bir_to_neff"]
    assert bir["kernel_func"] == BUILTIN_KERNEL and bir["frontend"] == "ParserFrontend"
    assert bir["inputs"] == expected_inputs() and list(bir["inputs"]) == ["a", "b"]  # the kernel's parameter order
    assert bir["output_names"] == ["out"]
    opts = bir["compile_opts"]
    assert (opts["target"], opts["lnc"], opts["output_path"]) == ("trn2", 2, str(work / "file.neff"))
    assert opts["artifacts_dir"] == str(work / "ir" / "artifacts")
    assert (neff["dependencies"], neff["input_names"], neff["output_names"]) == ([], ["a", "b"], ["out"])
    # the worker ran without the sweep's visible cores, with the target where NKI 0.3+ reads it and
    # the point's LNC where NKI 0.7 reads the kernel's
    assert bir["env"] == {
        "NEURON_RT_VISIBLE_CORES": None,
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
        "NEURON_LOGICAL_NC_CONFIG": "2",
    }
    assert out.neff_path == work / "file.neff" and read_neff(out.neff_path).outputs == ["out"]
    with tarfile.open(out.ir_path) as tar:  # the IR artifact: the IR folder as one reproducible file
        assert [(m.name, m.mtime, m.uid) for m in tar.getmembers()] == [
            ("artifacts", 0, 0),
            ("artifacts/kernel.bir", 0, 0),
        ]
    assert out.compile_seconds is not None and out.trace_seconds > 0


def test_a_driver_without_output_names_is_a_variant_and_its_outputs_map_back_by_order(host, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "3")  # the sweep's own: never the worker's
    calls = host("driver_no_names")
    out = run(tmp_path)
    assert out.tracer == "nki.compiler.driver/no-output-names"
    assert "output_names" not in recorded(calls)["compile_to_bir"]
    neff_outputs = read_neff(out.neff_path).outputs
    assert neff_outputs == ["output_0"]  # what a frontend NEFF is called without names
    saved = {"output_0": tmp_path / "output_0"}
    assert outputs_by_kernel_name(saved, neff_outputs, ["out"]) == {"out": tmp_path / "output_0"}


def test_frontend_route_as_nki_library_ran_it_in_april_2026(host, tmp_path):
    calls = host("frontend_0413")
    out = run(tmp_path)
    assert (out.tracer, out.nki_version) == ("nki.compiler.frontend", "0.4.0+standin")
    compiled = recorded(calls)["ParserFrontend.compile"]
    assert compiled["kernel_func"] == BUILTIN_KERNEL and compiled["inputs"] == expected_inputs()
    assert (compiled["target"], compiled["lnc"], compiled["output_names"]) == ("trn2", 2, ["out"])
    assert compiled["artifacts_dir"] == str(tmp_path / "work" / "ir" / "frontend")
    options = recorded(calls)["CompiledKernel.from_frontend"]["options"]
    assert options["output_path"] == str(tmp_path / "work" / "file.neff")
    assert read_neff(out.neff_path).outputs == ["out"]


def test_the_context_recipe_is_a_variant_of_the_frontend_route(host, tmp_path):
    calls = host("frontend_context")
    out = run(tmp_path)
    assert out.tracer == "nki.compiler.frontend/context+no-output-names"
    assert recorded(calls)["ParserFrontend.compile"]["ctx"] == "ctx" and "nki_ir_context" in recorded(calls)
    assert read_neff(out.neff_path).outputs == ["output_0"]


def test_standalone_compiles_with_nki_librarys_nine_positionals(host, tmp_path):
    """nki-library passes a ninth, enable_device_dump (test/utils/kernel_tracer.py at d2ad3a5); the
    stand-in's has no default, so an adapter passing eight fails (real-host audit 2, risk 9)."""
    calls = host("standalone")
    out = run(tmp_path)
    assert (out.tracer, out.nki_version) == ("neuronxcc.nki_standalone", "0.3.0+standin")
    call = recorded(calls)["compile_nki_ir_kernel_to_neff"]
    assert call["kernel_func"] == BUILTIN_KERNEL and call["kernel_inputs_dict"] == expected_inputs()
    assert call["kernel_outputs"] == [{"shape": [4, 128, 8], "dtype": "bfloat16", "name": "out"}]
    assert (call["platform_target"], call["logical_nc_config"], call["version"]) == ("trn2", 2, "beta2")
    assert call["output_directory"] == str(tmp_path / "work" / "ir") and call["additional_compiler_args"] == ""
    assert call["enable_device_dump"] is False
    assert out.neff_path == tmp_path / "work" / "file.neff"  # moved out of the IR folder
    with tarfile.open(out.ir_path) as tar:
        assert tar.getnames() == ["penguin.py"]


def test_legacy_route_keeps_the_weights_and_compiles_with_the_reference_flags(host, tmp_path):
    calls = host("legacy")
    point = POINT.model_copy(update={"platform": "trn1", "lnc": 1})
    out = run(tmp_path, point, kernel="legacy_kernels:vector_add_kernel")
    assert (out.tracer, out.neff_path) == ("legacy-penguin", None)
    steps = recorded(calls)
    assert steps["TraceKernel.trace"]["platform_target"] == "trn1" and steps["traced_kernel"]["lnc"] == 1
    assert steps["IRWriter.run"]["save_weights"] is True
    ir = tracing.unpack(out.ir_path, tmp_path / "ir")
    assert sorted(str(p.relative_to(ir)) for p in ir.rglob("*")) == ["penguin.py", "weights", "weights/w0.bin"]
    sim = sim_toolchain(tmp_path / "sim")
    neff = compiler.compile_ir(sim, ir / "penguin.py", ir, "trn1", None, timeout_seconds=120)
    assert read_neff(neff).info["target"] == "trn1"


def test_the_newest_generation_whose_signatures_fit_wins(host, tmp_path):
    host("legacy", "standalone", "driver_0606")  # each prepended: driver_0606's nki comes first
    probe = tracing.probe(NEURON, tmp_path)
    assert [(s.name, s.available) for s in probe.statuses] == [
        ("nki.compiler.driver", True),
        ("nki.compiler.frontend", True),
        ("neuronxcc.nki_standalone", True),
        ("legacy-penguin", False),  # the standalone root's neuronxcc shadows the legacy one
        ("nki.jit/artifacts", True),  # the last resort: tried only when none of the others fits
    ]  # fmt: skip
    assert probe.selected.tracer_id == "nki.compiler.driver" and probe.statuses[-2].best_effort


def test_an_api_no_adapter_knows_is_unavailable_not_a_failure_at_every_point(host, tmp_path):
    host("unknown_variant")
    probe = tracing.probe(NEURON, tmp_path)
    assert probe.selected.tracer_id == "nki.jit/artifacts"  # the last resort, which needs a core lease
    reasons = {s.name: s.reason for s in probe.statuses}
    assert (
        "unknown API variant" in reasons["nki.compiler.driver"]
        and "unknown API variant" in reasons["nki.compiler.frontend"]
    )
    with pytest.raises(TraceError) as info:
        run(tmp_path)
    assert info.value.error_class == "TracerUnavailable" and "nki 0.9.0+standin" in info.value.message


@pytest.mark.skipif(any(package_version(n).version for n in SDK_PACKAGES), reason="this host has Neuron SDK packages")
def test_no_tracer_names_what_is_installed(host, tmp_path):
    host()
    with pytest.raises(TraceError) as info:
        run(tmp_path)
    error = info.value
    assert error.error_class == "TracerUnavailable" and error.retryable is False
    assert "nki.compiler.driver (ModuleNotFoundError: No module named 'nki')" in error.message
    assert (
        "installed: neuronx-cc not installed, nki not installed" in error.message and "--toolchain sim" in error.message
    )


def test_pypi_placeholders_are_named_as_placeholders(host, tmp_path):
    host("placeholder")
    with pytest.raises(TraceError) as info:
        run(tmp_path)
    message = info.value.message
    assert "ImportError: WRONG PACKAGE" in message  # the placeholder's own import error
    assert "neuronx-cc 1.0.post1 (PyPI placeholder, not the Neuron SDK)" in message
    assert "nki 0.0.1 (PyPI placeholder, not the Neuron SDK)" in message


@pytest.mark.parametrize("root", ["driver_0606", "frontend_0413", "standalone"])
def test_kernel_errors_raised_while_tracing_are_classified(host, tmp_path, root):
    host(root)
    with pytest.raises(TraceError) as info:
        run(tmp_path, kernel="standin_kernels:too_many_partitions")
    assert info.value.error_class == "KernelConstraint" and info.value.retryable is False
    assert "number of partitions 256 exceed architecture limitation of 128" in info.value.message


def test_compiler_errors_from_an_in_process_compile_are_compile_errors(host, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSWEEP_SIM_FAULTS", "compile-error=vector_add")
    host("driver_0606")
    with pytest.raises(CompileError) as info:
        run(tmp_path)
    assert info.value.error_class == "CompilerDiagnostic" and "[NCC_EVRF009]" in info.value.message
    assert "Traceback" in info.value.stderr_tail  # the worker's traceback comes back with the error


def test_kernel_parameters_must_match_the_definitions_inputs(host, tmp_path):
    host("driver_0606")
    with pytest.raises(TraceError) as info:
        run(tmp_path, kernel="standin_kernels:wrong_names")
    assert info.value.error_class == "KernelSignature"
    assert "wrong_names(x, y)" in info.value.message and "['a', 'b']" in info.value.message


def test_a_missing_nki_kernel_is_a_clear_trace_error(host, tmp_path):
    host("driver_0606")
    with pytest.raises(TraceError) as info:
        run(tmp_path, kernel="standin_kernels:no_such_kernel")
    assert info.value.error_class == "KernelImport" and "standin_kernels:no_such_kernel" in info.value.message


def test_a_hung_compiler_is_killed_at_the_timeout_and_never_retried(host, tmp_path, monkeypatch):
    """A compile that does not finish in the limit will not in the next try either: a retried timeout
    held a compile slot for about 2.5 h before failing (real-host audit 2, N5)."""
    monkeypatch.setenv("STANDIN_HANG", "1")
    host("driver_0606")
    with pytest.raises(TraceError) as info:
        run(tmp_path, timeout=1)  # killed wherever it is by then: the classification is what is checked
    assert info.value.error_class == "Timeout" and info.value.retryable is False


def test_a_crashed_compiler_costs_one_point_not_the_sweep(host, tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_CRASH", "1")
    host("driver_0606")
    with pytest.raises(TraceError) as info:
        run(tmp_path)
    assert info.value.error_class == "TracerCrash" and "exit -6" in info.value.message


def test_the_simulated_tracer_fails_at_trace_time_in_nkis_words(tmp_path):
    """Points past a kernel's limits fail before any compile, as with the real NKI tracer (seed 004)."""
    sim = sim_toolchain(tmp_path / "sim")
    too_wide = POINT.model_copy(update={"params": {"n": 4096, "partition_size": 256, "free_size": 16}})
    request = tracing.TraceRequest.for_point(too_wide, VectorAdd(), "trn2")
    with pytest.raises(TraceError) as info:
        tracing.trace(sim, request, tmp_path / "work", timeout_seconds=120)
    assert info.value.error_class == "KernelConstraint" and info.value.retryable is False
    assert info.value.message.startswith(
        "sim-nki-frontend: ValueError: number of partitions 256 exceed architecture limitation of 128. "
        "Info on how to fix:"
    )


def test_the_simulated_frontend_names_outputs_only_when_told(tmp_path):
    sim = sim_toolchain(tmp_path / "sim")
    request = tracing.TraceRequest.for_point(POINT, VectorAdd(), "trn2")
    named = tracing.trace(sim, request, tmp_path / "a", tracer="sim-nki-frontend", timeout_seconds=120)
    assert (named.tracer, named.nki_version) == ("sim-nki-frontend", "0.7.0+kernelsweep.sim")
    assert read_neff(named.neff_path).outputs == ["out"]
    unnamed = tracing.TraceRequest(**{**request.__dict__, "output_names": None})
    assert read_neff(
        tracing.trace(sim, unnamed, tmp_path / "b", tracer=None, timeout_seconds=120).neff_path
    ).outputs == ["output_0"]
