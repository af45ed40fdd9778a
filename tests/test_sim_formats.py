"""The simulated profiler's output formats and configured faults, through the production adapters.

Every tool runs as its own process (resolve.sim_toolchain), exactly as a sweep runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelsweep.errors import CaptureError, CompileError, DeviceBusyError, ExtractError, TraceError
from kernelsweep.kernels import load_kernel
from kernelsweep.profiles.metrics import read_profile
from kernelsweep.sim.ntff import MAGIC
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import profiler, tracing
from kernelsweep.toolchain.process import recording
from kernelsweep.toolchain.resolve import Toolchain

POINT = Point(
    sweep="t", kernel="vector_add", kernel_ref="kernelsweep.kernels.vector_add:vector_add",
    params={"n": 4096, "partition_size": 128, "free_size": 32}, dtype="float32", platform="trn2", lnc=2, seed=0,
)  # fmt: skip
MATMUL = Point(
    sweep="t", kernel="matmul", kernel_ref="kernelsweep.kernels.matmul:matmul",
    params={"M": 128, "K": 128, "N": 512}, dtype="bfloat16", platform="trn2", lnc=2, seed=0,
)  # fmt: skip


def compiled(sim: Toolchain, point: Point, workdir: Path) -> Path:
    """Traced and compiled in one call, as current NKI does; a compile error comes back as a CompileError."""
    workdir.mkdir(parents=True, exist_ok=True)
    request = tracing.TraceRequest.for_point(point, load_kernel(point.kernel_ref), point.platform)
    neff = tracing.trace(sim, request, workdir / "trace", tracer=None, timeout_seconds=120).neff_path
    assert neff is not None
    return neff


def inputs(point: Point, workdir: Path) -> dict[str, Path]:
    files = {}
    for name, array in load_kernel(point.kernel_ref).build_inputs(point.params, point.dtype, point.seed).items():
        files[name] = workdir / f"inp-{name}-000.bin"
        files[name].write_bytes(array.tobytes())
    return files


def capture(sim: Toolchain, neff: Path, workdir: Path, timeout_seconds: float = 120) -> profiler.CaptureOutput:
    return profiler.capture(
        sim, neff, inputs(POINT, workdir), workdir, num_exec=3, profile_nth_exec=2, visible_cores="0", lnc=2,
        timeout_seconds=timeout_seconds,
    )  # fmt: skip


@pytest.fixture
def captured(tmp_path) -> tuple[Toolchain, Path, Path]:
    sim = sim_toolchain(tmp_path / "state")
    neff = compiled(sim, POINT, tmp_path / "work")
    return sim, neff, capture(sim, neff, tmp_path / "work").ntff


def test_every_view_format_normalises_to_the_same_metrics(captured, tmp_path):
    sim, neff, ntff = captured
    assert sim.profiler == "neuron-explorer"
    read = {}
    for fmt in ("json", "summary-json", "parquet"):
        out = tmp_path / fmt
        out.mkdir()
        path = profiler.view(sim, neff, ntff, out, timeout_seconds=120, profile_format=fmt).path
        read[fmt] = read_profile(path)
        assert read[fmt].source_format == fmt
    assert read["summary-json"].percent_unit == "fraction" and read["parquet"].percent_unit == "percent"
    reference = read["json"].values
    assert reference["total_time_us"] is not None and reference["dma_active_time_percent"] > 1
    for fmt in ("summary-json", "parquet"):
        assert read[fmt].values.keys() == reference.keys()
        for name, value in reference.items():
            assert read[fmt].values[name] == (None if value is None else pytest.approx(value, rel=1e-9)), (fmt, name)
            if isinstance(value, int):
                assert isinstance(read[fmt].values[name], int), (fmt, name)


def test_summary_json_keeps_fractions_keyed_by_profile_id(captured, tmp_path):
    sim, neff, ntff = captured
    path = profiler.view(sim, neff, ntff, tmp_path, timeout_seconds=120, profile_format="summary-json").path
    entries = json.loads(path.read_text())  # one per physical core at LNC=2
    assert len(entries) == 2 and all(profile_id.startswith("n_") for profile_id in entries)
    first, second = entries.values()  # one [128, 32] tile: the first core does it all, the second idles
    assert 0 < first["tensor_engine_active_time_percent"] <= 1 and first["is_simulation"] is True
    assert second["vector_engine_active_time_percent"] == 0 and second["total_time"] < first["total_time"]


def test_parquet_is_an_explorer_folder_with_summary_and_metadata(captured, tmp_path):
    sim, neff, ntff = captured
    folder = profiler.view(sim, neff, ntff, tmp_path, timeout_seconds=120, profile_format="parquet").path
    tables = {"Summary.parquet", "Metadata.parquet", "SchemaFields.parquet", "Warning.parquet", "Instruction.parquet"}
    assert folder.is_dir() and {p.name for p in folder.iterdir()} == tables
    info = read_profile(folder).info
    assert info["profile_schema_version"] == "7.4.0" and info["is_simulation"] == "true"
    assert info["compiler_version"].endswith("+kernelsweep.sim") and info["instance_type"] == "trn2.sim"
    assert float(info["tensor_engine_clock_freq"]) == 2.4e9


def test_neuron_profile_has_no_parquet_output(captured, tmp_path):
    sim, neff, ntff = captured
    old = Toolchain(kind="sim", commands={k: v for k, v in sim.commands.items() if k != "neuron-explorer"}, env=sim.env)
    assert old.profiler == "neuron-profile"
    with pytest.raises(ExtractError, match="invalid choice: 'parquet'") as info:
        profiler.view(old, neff, ntff, tmp_path, timeout_seconds=120, profile_format="parquet")
    assert info.value.retryable is False


def test_ntff_version_skew_is_the_real_deterministic_error(captured, tmp_path):
    sim, neff, ntff = captured
    record = json.loads(ntff.read_bytes()[len(MAGIC) :])
    future = tmp_path / "profile_exec_2.ntff"
    future.write_bytes(MAGIC + json.dumps({**record, "ntff_version": 4}).encode())
    with pytest.raises(ExtractError) as info:
        profiler.view(sim, neff, future, tmp_path, 120, "json")
    assert info.value.error_class == "ToolVersionMismatch" and info.value.retryable is False
    assert info.value.message == (
        "neuron-explorer view failed: NTFF version 4 is not supported by this neuron-explorer: the runtime that "
        "wrote it is newer than the profiler; upgrade aws-neuronx-tools to the runtime's Neuron release"
    )


def test_injected_busy_core_fails_the_first_captures_then_clears(tmp_path):
    sim = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_FAULTS": "capture-busy=2"})
    neff = compiled(sim, POINT, tmp_path / "work")
    for _ in range(2):  # counted across processes: each capture is a fresh process
        with pytest.raises(DeviceBusyError) as info:
            capture(sim, neff, tmp_path / "work")
        assert info.value.retryable and info.value.error_class == "DeviceBusy"
        assert "NeuronCore(s) not available - Requested:nc0-nc0 Available:0" in info.value.message
        assert "nrt_init failed. Status = 1" in info.value.stderr_tail
    assert capture(sim, neff, tmp_path / "work").ntff.name == "profile_exec_2.ntff"  # N=3, M=2: exec 2 only
    fresh = sim_toolchain(tmp_path / "other-state", env={"KERNELSWEEP_SIM_FAULTS": "capture-busy=2"})
    with pytest.raises(DeviceBusyError):  # each state dir counts from zero
        capture(fresh, neff, tmp_path / "work")


def test_injected_capture_timeout_hangs_until_killed(tmp_path):
    sim = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_FAULTS": "capture-timeout=1"})
    neff = compiled(sim, POINT, tmp_path / "work")
    with pytest.raises(CaptureError) as info:
        capture(sim, neff, tmp_path / "work", timeout_seconds=3)
    assert info.value.error_class == "Timeout" and info.value.retryable
    assert capture(sim, neff, tmp_path / "work").ntff.is_file()  # the hung process held no core after its kill


def test_injected_compile_error_is_deterministic_and_only_for_that_kernel(tmp_path):
    """Raised by the compile inside the tracing call, as current NKI compiles (the legacy CLI route
    is covered in test_sim_roundtrip)."""
    sim = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_FAULTS": "compile-error=vector_add"})
    for attempt in range(2):
        with pytest.raises(CompileError) as info:
            compiled(sim, POINT, tmp_path / f"work{attempt}")
        error = info.value
        assert (error.error_class, error.retryable) == ("CompilerDiagnostic", False)
        assert error.message.startswith("sim-nki-frontend: [NCC_EVRF009]") and "KERNELSWEEP_SIM_FAULTS" in error.message
    assert compiled(sim, MATMUL, tmp_path / "matmul").name == "file.neff"


def test_a_bad_fault_spec_is_named(tmp_path):
    sim = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_FAULTS": "capture-bizzy=2"})
    with pytest.raises(TraceError, match="KERNELSWEEP_SIM_FAULTS: bad entry 'capture-bizzy=2'"):
        compiled(sim, POINT, tmp_path / "work")


def test_capture_passes_check_output_determinism(captured, tmp_path):
    sim, neff, _ = captured
    argv = profiler.capture_argv(sim, "file.neff", {"a": "a.bin"}, num_exec=2, profile_nth_exec=2,
                                 check_output_determinism=True)  # fmt: skip
    assert argv[-4:] == ["--check-output-determinism", "--save-output", "a", "a.bin"]
    result = profiler.capture(
        sim, neff, inputs(POINT, tmp_path), tmp_path, num_exec=2, profile_nth_exec=2, visible_cores="1", lnc=2,
        timeout_seconds=120, check_output_determinism=True,
    )  # fmt: skip
    assert result.ntff.name == "profile_exec_2.ntff"


def test_one_profile_reads_the_same_under_schema_7_and_schema_12_stand_ins(captured, tmp_path):
    """The same NTFF viewed by a 7.4.0-shaped and a 12.0.1-shaped Explorer (the latter's times in
    nanoseconds, a stand-in hypothesis its schema states) gives identical named columns in every format."""
    from kernelsweep.toolchain import explorer

    sim, neff, ntff = captured
    later = Toolchain(kind="sim", commands=sim.commands, env={**sim.env, "KERNELSWEEP_SIM_TOOLS": "2.33"})
    read = {}
    for name, tools in (("7", sim), ("12", later)):
        schema = explorer.ask_schema(tools)
        for fmt in ("summary-json", "parquet"):  # full JSON ends with 2.33; test_stages reads 2.34's Parquet
            out = tmp_path / name / fmt
            out.mkdir(parents=True)
            read[name, fmt] = read_profile(profiler.view(tools, neff, ntff, out, 120, fmt).path, schema=schema)
    assert read["12", "summary-json"].schema.version == "12.0.1" and read["7", "summary-json"].schema.version == "7.4.0"
    raw = json.loads((tmp_path / "12" / "summary-json" / "profile_summary.json").read_text())
    assert all(isinstance(entry["total_time"], int) for entry in raw.values())  # nanoseconds, as stated
    for fmt in ("summary-json", "parquet"):
        assert read["12", fmt].values == read["7", fmt].values, fmt
        assert read["12", fmt].values["total_time_us"] is not None and read["12", fmt].entries == 2


@pytest.mark.slow  # the stage test covers the fallback in the default stage; this one pins the argv and the busy case
def test_a_capture_that_times_out_with_dge_notifications_runs_again_without(captured, tmp_path):
    sim, neff, _ = captured
    faulty = Toolchain(kind="sim", commands=sim.commands, env={**sim.env, "KERNELSWEEP_SIM_FAULTS": "dge-timeout=1"})
    with recording() as runs:
        out = profiler.capture(
            faulty, neff, inputs(POINT, tmp_path), tmp_path, num_exec=2, profile_nth_exec=2, visible_cores="0",
            lnc=2, timeout_seconds=120, dge_notifs=True,
        )  # fmt: skip
    assert [profiler.DGE_NOTIFS_FLAG in run.argv for run in runs] == [True, False]
    assert out.dge_notifs is False and out.note.startswith("with --enable-dge-notifs: ")
    view = profiler.view(sim, neff, out.ntff, tmp_path, 120, "summary-json")
    assert view.dma_warning == (
        "WARN[0000] DMA results may not be accurate: DGE notifications were not collected; recapture with "
        "--enable-dge-notifs"
    )
    busy = Toolchain(kind="sim", commands=sim.commands, env={**sim.env, "KERNELSWEEP_SIM_FAULTS": "capture-busy=1"})
    with recording() as runs, pytest.raises(DeviceBusyError):  # only a timeout is the flag's to drop
        profiler.capture(busy, neff, inputs(POINT, tmp_path), tmp_path, num_exec=2, profile_nth_exec=2,
                         visible_cores="0", lnc=2, timeout_seconds=120, dge_notifs=True)  # fmt: skip
    assert len(runs) == 1
