"""`--toolchain cpu`: the real SDK traces and compiles (here: a stand-in SDK, nki 0.6 with nki.simulate),
the simulator's model of the point is what gets captured and timed, and nki.simulate's outputs of the
real kernel are what the correctness check reads. The whole chain through the CLI, under another
interpreter, is tests/test_worker_interpreter.py's."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from stage_context import point
from standin_host import STAND_INS

from kernelsweep.dtypes import numpy_dtype
from kernelsweep.errors import UsageError
from kernelsweep.kernels import load_kernel
from kernelsweep.locks import CoreLeaser
from kernelsweep.sim import RUNTIME_VERSION
from kernelsweep.sim.toolchain import cpu_toolchain
from kernelsweep.stages import compile_stage, trace_stage
from kernelsweep.stores.artifacts import LocalArtifactStore
from kernelsweep.sweepspec.models import CaptureSettings
from kernelsweep.this_host.context import StageContext
from kernelsweep.toolchain.neff import read_neff
from kernelsweep.toolchain.tracing.tracers import TRACERS
from kernelsweep.toolchain.versions import ToolVersions


@pytest.fixture
def cpu_context(tmp_path, monkeypatch):
    for root in ("kernels", "driver_0606"):
        monkeypatch.syspath_prepend(str(STAND_INS / root))
    monkeypatch.setenv("STANDIN_CALLS", str(tmp_path / "calls.jsonl"))
    toolchain = cpu_toolchain(tmp_path / "sim", {}, TRACERS, None)
    versions = ToolVersions(  # what collect() finds with this stand-in SDK, without its probe process
        compiler="2.27.5334.0+f702b353", profiler=None, runtime=RUNTIME_VERSION, nki="0.6.0+standin",
        profiler_tool="neuron-explorer", instance_type="simulated", tracer="nki.compiler.driver",
    )  # fmt: skip
    return StageContext(
        toolchain=toolchain,
        store=LocalArtifactStore(tmp_path / "artifacts"),
        capture=CaptureSettings(num_exec=2),
        leasers={1: CoreLeaser(tmp_path / "leases", [0, 1], lnc=1)},
        compile_slots=1,
        versions=versions,
    )


def test_the_cpu_toolchain_is_the_sdks_compile_and_the_simulators_device(tmp_path):
    toolchain = cpu_toolchain(tmp_path, {"neuronx-cc": ("/sdk/bin/neuronx-cc",), "neuron-ls": ("/x",)}, TRACERS, None)
    assert toolchain.kind == "cpu" and toolchain.is_simulation  # its rows are marked simulated
    assert toolchain.commands["neuronx-cc"] == ("/sdk/bin/neuronx-cc",) and toolchain.tracers == TRACERS
    assert toolchain.commands["neuron-ls"][-1] == "kernelsweep.sim.neuron_ls"  # the simulated device
    assert "OMP_NUM_THREADS" not in toolchain.env  # the real compiler keeps its threads
    alone = cpu_toolchain(tmp_path, {}, TRACERS, None)
    assert "neuronx-cc" not in alone.commands  # never the simulated compiler under a real trace


def test_a_cpu_trace_keeps_the_model_to_capture_and_nki_simulates_outputs(cpu_context, tmp_path):
    p = point("mlp", dtype="bfloat16", platform="trn1")
    traced = trace_stage(cpu_context, p)
    compiled = compile_stage(cpu_context, p, traced)
    assert compiled.neff == traced.neff and compiled.model == traced.model and traced.model.note is None
    store = cpu_context.store
    model = read_neff(store.fetch(traced.model.neff, tmp_path / "model.neff"))
    assert model.info["is_simulation"] is True and model.outputs == ["out"]
    definition = load_kernel(p.kernel_ref)
    inputs = definition.build_inputs(p.params, p.dtype, p.seed)
    expected = definition.reference(inputs, p.params)["out"]
    raw = store.fetch(traced.model.outputs["out"], tmp_path / "out.bin").read_bytes()
    got = np.frombuffer(raw, dtype=numpy_dtype("bfloat16")).reshape(expected.shape).astype(np.float64)
    assert np.allclose(got, expected, atol=0.1, rtol=0.1)  # the kernel's own numbers, computed by nki.simulate
    again = trace_stage(cpu_context, p)
    assert again.cache_hit and again.model == traced.model  # kept with the trace


def test_the_model_a_cpu_run_captures_is_built_as_the_sdks_compiler_the_row_reports(cpu_context, tmp_path, monkeypatch):
    # the simulator's culprit build is this SDK's compiler: its model must run the culprit's slower code,
    # and name that compiler, never the simulator's default one (whose code is not the culprit's)
    monkeypatch.setenv("KERNELSWEEP_SIM_CULPRIT_BUILD", "2.27@vector_add:1.5")
    traced = trace_stage(cpu_context, point("vector_add"))
    model = read_neff(cpu_context.store.fetch(traced.model.neff, tmp_path / "model.neff"))
    built = model.neff["kernelsweep_sim"]
    assert model.info["tool_version"] == built["compiler_version"] == cpu_context.versions.compiler
    assert built["code_factor"] == 1.5


def test_nki_simulate_has_no_inf2_target_so_the_row_says_unchecked(cpu_context):
    traced = trace_stage(cpu_context, point("vector_add", platform="inf2"))
    assert traced.model.outputs == {} and traced.model.note == "nki.simulate does not target inf2"


def test_a_cpu_run_without_an_sdk_fails_before_any_work(tmp_path, monkeypatch):
    from kernelsweep.sweepspec.load import parse_spec
    from kernelsweep.this_host.context import Locations, prepare

    monkeypatch.setenv("KERNELSWEEP_NEURON_PYTHON", "")
    spec = parse_spec(
        {
            "name": "cpu",
            "platforms": ["trn2"],
            "toolchain": "cpu",
            "kernels": [{"kernel": "vector_add", "grid": {"n": [2048], "partition_size": [128], "free_size": [1]}}],
        }
    )
    locations = Locations(sim_state_dir=tmp_path / "sim", lock_dir=tmp_path / "locks")
    with pytest.raises(UsageError, match="--toolchain cpu traces and compiles with the real Neuron SDK"):
        prepare(spec, locations)


def test_an_sdk_environments_compiler_is_the_one_beside_its_python_never_one_elsewhere_on_path(tmp_path, monkeypatch):
    from kernelsweep.this_host.context import resolve_toolchain
    from kernelsweep.toolchain.tracing.interpreter import NeuronPython

    def tool(folder, name="neuronx-cc"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
        return str(folder / name)

    elsewhere = tool(tmp_path / "system-bin")  # another SDK's compiler, on PATH
    monkeypatch.setenv("PATH", f"{tmp_path / 'system-bin'}{os.pathsep}{os.environ['PATH']}")
    venv = tmp_path / "sdk" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    python = NeuronPython(str(venv / "python"), "spec")
    toolchain, _ = resolve_toolchain("cpu", tmp_path / "sim", (), python)
    assert "neuronx-cc" not in toolchain.commands  # its rows' compiler: the venv's package (the trace worker's)
    beside = tool(venv)
    toolchain, _ = resolve_toolchain("cpu", tmp_path / "sim", (), python)
    assert toolchain.commands["neuronx-cc"] == (beside,)
    ours, _ = resolve_toolchain("cpu", tmp_path / "sim", (), NeuronPython(sys.executable, "kernelsweep's own"))
    assert ours.commands["neuronx-cc"] == (elsewhere,)  # this interpreter's SDK: the host's tools, as before
