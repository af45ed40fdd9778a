"""The simulated toolchain through the production adapters and parsers, and the contracts it holds
them to: every one of these fails where a real host would."""

from __future__ import annotations

import fcntl
import gzip
from pathlib import Path

import numpy as np
import pytest

from kernelsweep.correctness import check_outputs
from kernelsweep.dtypes import numpy_dtype
from kernelsweep.errors import CaptureError, CompileError, DeviceBusyError
from kernelsweep.kernels import load_kernel
from kernelsweep.profiles.metrics import read_profile
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import compiler, profiler, tracing
from kernelsweep.toolchain.compiler import compiler_version
from kernelsweep.toolchain.devices import list_devices
from kernelsweep.toolchain.neff import HEADER_SIZE, OFF_NAME, read_neff
from kernelsweep.toolchain.process import run_tool

MLP_POINT = Point(
    sweep="t",
    kernel="mlp",
    kernel_ref="kernelsweep.kernels.mlp:mlp",
    params={"b": 1, "s": 128, "h": 1024, "i": 512},
    dtype="bfloat16",
    platform="trn2",
    lnc=2,
    seed=0,
)


@pytest.fixture
def sim(tmp_path):
    return sim_toolchain(tmp_path / "state")


def _traced(sim, point: Point, workdir: Path, output_names: bool = True) -> tracing.TraceOutput:
    request = tracing.TraceRequest.for_point(point, load_kernel(point.kernel_ref), point.platform)
    if not output_names:
        request = tracing.TraceRequest(**{**request.__dict__, "output_names": None})
    return tracing.trace(sim, request, workdir / "trace", tracer=None, timeout_seconds=120)


def _compiled(sim, point: Point, workdir: Path) -> Path:
    neff = _traced(sim, point, workdir).neff_path
    assert neff is not None and neff.name == "file.neff"  # current NKI compiles while it traces
    return neff


def _inputs(point: Point, workdir: Path) -> dict[str, Path]:
    arrays = load_kernel(point.kernel_ref).build_inputs(point.params, point.dtype, point.seed)
    files = {}
    for name, array in arrays.items():
        files[name] = workdir / f"inp-{name}-000.bin"
        files[name].write_bytes(array.tobytes())
    return files


def _capture(sim, neff: Path, point: Point, workdir: Path, **options) -> profiler.CaptureOutput:
    settings = {"num_exec": 1, "profile_nth_exec": None, "visible_cores": "0", "lnc": point.lnc} | options
    return profiler.capture(sim, neff, _inputs(point, workdir), workdir, timeout_seconds=120, **settings)


def test_sim_neff_has_the_documented_container_shape(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    raw = neff.read_bytes()
    assert raw[HEADER_SIZE : HEADER_SIZE + 2] == b"\x1f\x8b"  # a gzipped tar (packaging_version 1)
    gzip.decompress(raw[HEADER_SIZE:])
    assert raw[OFF_NAME : OFF_NAME + 3] == b"mlp"  # the name at byte 268 (KLR's NEFF/Basic.lean)
    info = read_neff(neff)
    assert info.packaging_version == 1 and info.num_tpb == 2 and info.name == "mlp"
    assert info.inputs == [
        "hidden_tensor",
        "gate_proj_weights_tensor",
        "up_proj_weights_tensor",
        "down_proj_weights_tensor",
    ]
    assert info.outputs == ["out"]
    assert info.info["tool_version"].endswith("+kernelsweep.sim") and info.info["is_simulation"] is True
    assert compiler_version(sim) == info.info["tool_version"]


def test_sim_capture_output_matches_the_numpy_reference(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    result = _capture(sim, neff, MLP_POINT, tmp_path, num_exec=10)
    assert result.ntff.name == "profile_exec_10.ntff" and set(result.outputs) == {"out"}
    kernel = load_kernel(MLP_POINT.kernel_ref)
    dtype = numpy_dtype("bfloat16")
    inputs = {
        t.name: np.fromfile(tmp_path / f"inp-{t.name}-000.bin", dtype=dtype).reshape(t.shape)
        for t in kernel.input_infos(MLP_POINT.params, "bfloat16")
    }
    expected = kernel.reference(inputs, MLP_POINT.params)
    got = np.fromfile(result.outputs["out"], dtype=dtype).reshape(1, 128, 1024)
    check = check_outputs({"out": got}, expected, "bfloat16")
    assert check.passed and 0 < check.max_abs_error < 0.05  # rounded to bf16, not bit-identical float64
    assert not check_outputs({"out": got[:, :, ::-1].copy()}, expected, "bfloat16").passed


@pytest.mark.parametrize(
    ("num_exec", "nth", "written"),
    [
        pytest.param(10, None, ["profile_exec_10.ntff"], id="last-execution-only"),
        pytest.param(
            6, 2, ["profile_exec_2.ntff", "profile_exec_4.ntff", "profile_exec_6.ntff"], id="every-2nd-not-only-the-2nd"
        ),
        # yesterday's reading of --profile-nth-exec=1 expected a profile_exec_1.ntff, which is never written
        pytest.param(
            3, 1, ["profile.ntff", "profile_exec_2.ntff", "profile_exec_3.ntff"], id="nth-1-writes-no-profile_exec_1"
        ),
    ],
)
def test_the_runtime_profiles_every_nth_execution(sim, tmp_path, num_exec, nth, written):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    result = _capture(sim, neff, MLP_POINT, tmp_path, num_exec=num_exec, profile_nth_exec=nth)
    assert sorted(p.name for p in tmp_path.glob("*.ntff")) == sorted(written)
    assert [p.name for p in result.ntffs] == written and result.ntff.name == written[-1]


def test_a_neff_without_output_names_saves_output_0(sim, tmp_path):
    neff = _traced(sim, MLP_POINT, tmp_path, output_names=False).neff_path
    saved = _capture(sim, neff, MLP_POINT, tmp_path).outputs
    assert set(saved) == {"output_0"}
    assert profiler.outputs_by_kernel_name(saved, read_neff(neff).outputs, ["out"]) == {"out": saved["output_0"]}


def test_a_neff_for_another_platform_is_refused_at_load(tmp_path):
    trn2_host = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_PLATFORM": "trn2"})
    trn1 = MLP_POINT.model_copy(update={"platform": "trn1", "lnc": 1})
    neff = _compiled(trn2_host, trn1, tmp_path)
    with pytest.raises(CaptureError) as info:
        _capture(trn2_host, neff, trn1, tmp_path)
    error = info.value
    assert error.error_class == "NeffLoad" and not error.retryable
    assert "Failed to load NN:" in error.message and "compiled for trn1; this instance is trn2" in error.stderr_tail
    allowed = sim_toolchain(
        tmp_path / "state", env={"KERNELSWEEP_SIM_PLATFORM": "trn2", "NEURON_RT_ALLOW_LEGACY_NEFF": "1"}
    )
    assert _capture(allowed, neff, trn1, tmp_path).ntff.is_file()  # the runtime's testing-only escape hatch


def test_trn3_compiles_but_the_simulated_runtime_will_not_make_up_its_timing(sim, tmp_path):
    """trn3's TensorE and profiler clocks are unpublished: the simulator refuses to model them."""
    trn3 = MLP_POINT.model_copy(update={"platform": "trn3", "params": {"b": 1, "s": 128, "h": 256, "i": 256}})
    neff = _compiled(sim, trn3, tmp_path)
    with pytest.raises(CaptureError) as info:
        _capture(sim, neff, trn3, tmp_path)
    assert info.value.message == (
        "neuron-explorer capture failed: the simulated runtime has no model of trn3 (its clocks are unpublished); "
        "capture trn3 points on a trn3 host"
    )
    assert info.value.retryable is False


def test_a_neff_for_another_lnc_is_refused_at_load(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)  # LNC=2
    with pytest.raises(CaptureError, match="Failed to load NN") as info:
        _capture(sim, neff, MLP_POINT, tmp_path, lnc=1)
    assert "compiled for LNC=2; NEURON_LOGICAL_NC_CONFIG is 1" in info.value.stderr_tail


@pytest.mark.slow
def test_explorer_parquet_view_does_not_return_without_ingest_only(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    ntff = _capture(sim, neff, MLP_POINT, tmp_path).ntff
    argv = profiler.view_argv(sim, str(neff), str(ntff), "parquet")
    assert argv[-2:] == ["--ingest-only", "--data-path=explorer-data"]  # the adapter's part: it never hangs
    # The stand-in's fidelity, not the adapter: without --ingest-only it serves its UI and never returns,
    # as the real neuron-explorer does. 4 s is ample for it to write its data and print that line.
    hanging = run_tool(argv[:-2], cwd=tmp_path, env=sim.env, timeout_seconds=4)
    assert hanging.timed_out and "localhost:3001" in hanging.stdout
    folder = profiler.view(sim, neff, ntff, tmp_path, 120, "parquet").path
    assert (folder / "Summary.parquet").is_file() and (tmp_path / "explorer-data").is_dir()


def test_sim_profile_round_trips_through_the_real_parser(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    captured = _capture(sim, neff, MLP_POINT, tmp_path)
    assert captured.ntff.name == "profile.ntff"
    for fmt in ("summary-json", "json"):
        metrics = read_profile(profiler.view(sim, neff, captured.ntff, tmp_path, 120, fmt).path)
        assert metrics.source_format == fmt and metrics.info["is_simulation"] == "true"
        total = metrics.values["total_time_us"]
        assert 10 < total < 200
        assert metrics.values["neuroncore_cycle_count"] == pytest.approx(total * 1e-6 * 1.2e9, rel=1e-3)
        assert 0 < metrics.values["tensor_engine_active_time_percent"] <= 100
        assert metrics.values["hbm_write_bytes"] == 1 * 128 * 1024 * 2


def test_sim_rejects_unknown_flags_like_the_real_tool(sim):
    argv = ["compile", "x.py", "--framework", "XLA", "--target", "trn2", "--frobnicate"]
    result = run_tool(sim.command("neuronx-cc") + argv, timeout_seconds=60)
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr


def test_the_legacy_route_compiles_only_with_nki_barematals_flags(tmp_path):
    legacy = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_NKI": "legacy"})
    point = MLP_POINT.model_copy(update={"kernel_ref": "kernels.legacy:legacy_vector_add", "kernel": "vector_add",
                                         "params": {"n": 4096, "partition_size": 128, "free_size": 8},
                                         "platform": "trn1", "lnc": 1})  # fmt: skip
    traced = _traced(legacy, point, tmp_path)
    assert (traced.tracer, traced.neff_path) == ("sim-penguin", None)
    ir = tracing.unpack(traced.ir_path, tmp_path / "ir")
    old = ["compile", "--framework", "XLA", "penguin.py", "--target", "trn1"]  # seed 000's short form
    refused = run_tool(legacy.command("neuronx-cc") + old, cwd=ir, env=legacy.env, timeout_seconds=60)
    assert refused.returncode == 70 and "--internal-tensorizer-opt-level=nki" in refused.stderr
    neff = compiler.compile_ir(legacy, ir / "penguin.py", ir, "trn1", None, timeout_seconds=60)
    assert read_neff(neff).outputs == ["out"]
    with pytest.raises(CompileError) as info:  # lnc 2 on trn1: the compiler's own diagnostic
        compiler.compile_ir(legacy, ir / "penguin.py", ir, "trn1", 2, timeout_seconds=60)
    assert "NCC_EARG001" in str(info.value) and info.value.retryable is False and info.value.returncode == 70


def test_sim_capture_on_a_held_core_is_the_nrt_busy_error(sim, tmp_path):
    """Logical core 1 at LNC=2 is physical cores 2 and 3: holding physical 3 makes it busy."""
    neff = _compiled(sim, MLP_POINT, tmp_path)
    runtime = Path(sim.env["KERNELSWEEP_SIM_STATE"]) / "runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    with open(runtime / "pnc3.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(DeviceBusyError) as info:
            _capture(sim, neff, MLP_POINT, tmp_path, visible_cores="1")
        assert _capture(sim, neff, MLP_POINT, tmp_path, visible_cores="0").ntff.is_file()
    assert info.value.retryable and "NeuronCore(s) not available" in str(info.value)


@pytest.mark.parametrize(("lnc", "cores"), [(None, [0, 1]), (2, [0, 1]), (1, [0, 1, 2, 3])])
def test_sim_neuron_ls_groups_cores_at_the_callers_lnc(sim, lnc, cores):
    inventory = list_devices(sim, lnc=lnc)
    assert inventory.logical_cores == cores and inventory.lnc == (lnc or 2)
    assert len(cores) * inventory.lnc == 4  # the same four physical cores either way


def test_a_trn1_host_has_no_logical_core_config(tmp_path):
    trn1 = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_PLATFORM": "trn1"})
    inventory = list_devices(trn1, lnc=2, default_lnc=1)
    assert inventory.lnc == 1 and inventory.logical_cores == [0, 1]  # NEURON_LOGICAL_NC_CONFIG is ignored


@pytest.mark.parametrize("visible", ["1-0", "a", "0,", "9"])
def test_the_simulated_runtime_refuses_a_bad_visible_cores_value_as_the_runtime_does(sim, tmp_path, visible):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    with pytest.raises(CaptureError) as info:
        _capture(sim, neff, MLP_POINT, tmp_path, visible_cores=visible)
    assert "Traceback" not in (info.value.stderr_tail or "")
