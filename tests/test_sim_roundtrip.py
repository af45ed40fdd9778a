"""The simulated toolchain through the production adapters and parsers."""

from __future__ import annotations

import fcntl
from pathlib import Path

import numpy as np
import pytest

from kernelsweep.correctness import check_outputs
from kernelsweep.dtypes import numpy_dtype
from kernelsweep.errors import CompileError, DeviceBusyError
from kernelsweep.kernels import load_kernel
from kernelsweep.metrics import read_profile
from kernelsweep.neff import HEADER_SIZE, read_neff
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.spec import Point
from kernelsweep.toolchain import compiler, profiler, tracing
from kernelsweep.toolchain.compiler import compiler_version
from kernelsweep.toolchain.devices import list_devices

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


def _compiled(sim, point: Point, workdir: Path) -> Path:
    traced = tracing.trace(sim, point, load_kernel(point.kernel_ref), workdir)
    assert traced.ir_path.name == "penguin.py"
    return compiler.compile_ir(sim, traced.ir_path, workdir, point.platform, point.lnc, timeout_seconds=120)


def _inputs(point: Point, workdir: Path) -> dict[str, Path]:
    arrays = load_kernel(point.kernel_ref).build_inputs(point.params, point.dtype, point.seed)
    files = {}
    for name, array in arrays.items():
        files[name] = workdir / f"inp-{name}-000.bin"
        files[name].write_bytes(array.tobytes())
    return files


def test_sim_neff_has_the_real_container_shape(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    assert neff.name == "file.neff" and neff.stat().st_size > HEADER_SIZE
    info = read_neff(neff)
    assert set(info.inputs) == {
        "hidden_tensor",
        "gate_proj_weights_tensor",
        "up_proj_weights_tensor",
        "down_proj_weights_tensor",
    }
    assert info.outputs == ["out"] and info.lnc_size == 2
    assert info.info["tool_version"].endswith("+kernelsweep.sim") and info.info["is_simulation"] is True
    assert compiler_version(sim) == info.info["tool_version"]


def test_sim_capture_output_matches_the_numpy_reference(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    files = _inputs(MLP_POINT, tmp_path)
    result = profiler.capture(
        sim, neff, files, tmp_path, num_exec=10, profile_nth_exec=2, visible_cores="0", lnc=2, timeout_seconds=120
    )
    assert result.ntff.name == "profile_exec_2.ntff"
    assert set(result.outputs) == {"out"}
    kernel = load_kernel(MLP_POINT.kernel_ref)
    dtype = numpy_dtype("bfloat16")
    inputs = {
        n: np.fromfile(p, dtype=dtype).reshape(t.shape)
        for (n, p), t in zip(files.items(), kernel.input_infos(MLP_POINT.params, "bfloat16"), strict=True)
    }
    expected = kernel.reference(inputs, MLP_POINT.params)
    got = np.fromfile(result.outputs["out"], dtype=dtype).reshape(1, 128, 1024)
    check = check_outputs({"out": got}, expected, "bfloat16")
    assert check.passed and 0 < check.max_abs_error < 0.05  # rounded to bf16, not bit-identical float64
    wrong = {"out": got[:, :, ::-1].copy()}
    assert not check_outputs(wrong, expected, "bfloat16").passed


def test_sim_profile_round_trips_through_the_real_parser(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    captured = profiler.capture(
        sim,
        neff,
        _inputs(MLP_POINT, tmp_path),
        tmp_path,
        num_exec=1,
        profile_nth_exec=None,
        visible_cores="0",
        lnc=2,
        timeout_seconds=120,
    )
    assert captured.ntff.name == "profile.ntff"
    profile = profiler.view(sim, neff, captured.ntff, tmp_path, 120, "json")
    metrics = read_profile(profile)
    assert metrics.source_format == "json"
    assert metrics.info["is_simulation"] == "true"
    total = metrics.values["total_time_us"]
    assert 10 < total < 200
    assert metrics.values["neuroncore_cycle_count"] == pytest.approx(total * 1e-6 * 1.2e9, rel=1e-3)
    assert 0 < metrics.values["tensor_engine_active_time_percent"] <= 100
    assert metrics.values["hbm_write_bytes"] == 1 * 128 * 1024 * 2


def test_sim_rejects_unknown_flags_like_the_real_tool(sim, tmp_path):
    from kernelsweep.toolchain.process import run_tool

    argv = ["compile", "x.py", "--framework", "XLA", "--target", "trn2", "--frobnicate"]
    result = run_tool(sim.command("neuronx-cc") + argv, timeout_seconds=60)
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr


def test_sim_compile_error_is_a_deterministic_compile_error(sim, tmp_path):
    point = MLP_POINT.model_copy(update={"platform": "trn1", "lnc": 2})
    traced = tracing.trace(sim, point, load_kernel(point.kernel_ref), tmp_path)
    with pytest.raises(CompileError) as info:
        compiler.compile_ir(sim, traced.ir_path, tmp_path, "trn1", 2, timeout_seconds=60)
    assert "NCC_EARG001" in str(info.value) and info.value.retryable is False and info.value.returncode == 70


def test_sim_capture_on_a_held_core_is_the_nrt_busy_error(sim, tmp_path):
    neff = _compiled(sim, MLP_POINT, tmp_path)
    runtime = Path(sim.env["KERNELSWEEP_SIM_STATE"]) / "runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    with open(runtime / "nc1.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(DeviceBusyError) as info:
            profiler.capture(
                sim,
                neff,
                _inputs(MLP_POINT, tmp_path),
                tmp_path,
                num_exec=1,
                profile_nth_exec=None,
                visible_cores="1",
                lnc=2,
                timeout_seconds=60,
            )
    assert info.value.retryable and "NeuronCore(s) not available" in str(info.value)


def test_sim_neuron_ls_reports_the_configured_cores(sim):
    inventory = list_devices(sim)
    assert inventory.logical_cores == [0, 1] and inventory.lnc == 1
