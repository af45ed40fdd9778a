"""Issue 33, R2: a point's tunables are bound into its kernel before tracing, never handed to the
compiler as inputs ("neuronxcc cannot handle 0-d tensor inputs": awslabs/nki-autotune inlines them).

Every stand-in SDK generation refuses a 0-d input as that compiler does (the diagnostic on fd 2,
"Pass pipeline failed" raised) and compiles the kernel it is handed, so a tuned point traces only
if the tunables reached the kernel as constants; the simulator's own tracers bind them the same way.
"""

from __future__ import annotations

import pytest
from standin_host import installer, recorded, run

from kernelsweep.errors import TraceError
from kernelsweep.kernels import nki_kernel_source
from kernelsweep.kernels.vector_add import VectorAdd
from kernelsweep.sim.ir import read_ir
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import tracing
from kernelsweep.toolchain.neff import read_neff
from kernelsweep.toolchain.tracing.binding import specialise

TUNED = Point(
    sweep="t", kernel="matmul", kernel_ref="kernelsweep.kernels.matmul:matmul", params={"M": 256, "K": 256, "N": 1024},
    dtype="bfloat16", platform="trn2", lnc=2, seed=0, tunables={"tile_n": 256, "loop_order": "nm"},
)  # fmt: skip
# N outer in 256-wide blocks: 4 blocks, each loading rhs in 2 K tiles, then 2 M tiles of (2 streamed K
# tiles + 1 store): 4 * (2 + 2 * 3) DMAs. The defaults (M outer, 512 wide) make 2 * (2 + 2 * 3) = 16.
TUNED_DMAS = 32
LEGACY_KERNEL = "legacy_kernels:vector_add_passes_kernel"
LEGACY_TUNED = Point(
    sweep="t", kernel="vector_add", kernel_ref="kernelsweep.kernels.vector_add:vector_add",
    params={"n": 4096, "partition_size": 128, "free_size": 8}, dtype="bfloat16", platform="trn1", lnc=1, seed=0,
    tunables={"passes": 3},
)  # fmt: skip
STAND_IN_ROOTS = ["driver_tuple", "driver_0606", "driver_0700", "driver_no_names", "frontend_0413",
                  "frontend_context", "standalone", "sdk_2_27"]  # fmt: skip
INPUTS_CALL = {"compile_nki_ir_kernel_to_neff": "kernel_inputs_dict", "compile_to_bir": "inputs",
               "ParserFrontend.compile": "inputs"}  # fmt: skip


@pytest.fixture
def host(monkeypatch, tmp_path):
    return installer(monkeypatch, tmp_path)


def simulated(out: tracing.TraceOutput) -> dict:
    """What the stand-in compiler traced, as the simulated NEFF carries it."""
    assert out.neff_path is not None
    return read_neff(out.neff_path).neff["kernelsweep_sim"]


def line_of(text: str) -> int:
    path, _ = nki_kernel_source("kernelsweep.kernels.nki.matmul:matmul_kernel")
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("root", STAND_IN_ROOTS)
def test_a_tuned_point_compiles_on_every_generation_with_tensors_alone_as_inputs(host, tmp_path, root):
    calls = host(root)
    out = run(tmp_path / "work", TUNED)
    traced = simulated(out)
    assert traced["traced_dma_count"] == TUNED_DMAS  # the bound values, not the kernel's defaults, ran
    handed = {name: args[key] for name, key in INPUTS_CALL.items() if key in (args := recorded(calls).get(name, {}))}
    for inputs in handed.values():
        assert sorted(inputs) == ["lhsT", "rhs"]
    # the bound kernel keeps the source's lines: the profile's locations still point into matmul.py
    assert traced["source_file"] == "matmul.py"
    matmul_lines = {line for line, engine, *_ in traced["lines"] if engine == "tensor"}
    assert matmul_lines == {line_of("nisa.nc_matmul(")}


def test_the_legacy_tracer_traces_the_bound_kernel(host, tmp_path):
    calls = host("legacy")
    out = run(tmp_path / "work", LEGACY_TUNED, kernel=LEGACY_KERNEL)
    assert out.tracer == "legacy-penguin"
    assert sorted(recorded(calls)["traced_kernel"]["inputs"]) == ["a", "b"]
    ir = tracing.unpack(out.ir_path, tmp_path / "ir")
    assert read_ir(ir / "penguin.py")["traced_dma_count"] == 36  # 3 passes x 4 tiles x (2 loads + 1 store)


@pytest.mark.parametrize("generation", ["0.6", "0.7"])
def test_the_simulators_frontend_binds_tunables_too(tmp_path, generation):
    sim = sim_toolchain(tmp_path / "sim", env={"KERNELSWEEP_SIM_NKI": generation})
    out = run(tmp_path / "work", TUNED, toolchain=sim)
    assert simulated(out)["traced_dma_count"] == TUNED_DMAS


def test_the_simulators_legacy_route_binds_tunables_too(host, tmp_path):
    host()  # legacy_kernels on the path
    sim = sim_toolchain(tmp_path / "sim", env={"KERNELSWEEP_SIM_NKI": "legacy"})
    out = run(tmp_path / "work", LEGACY_TUNED, kernel=LEGACY_KERNEL, toolchain=sim)
    ir = tracing.unpack(out.ir_path, tmp_path / "ir")
    assert read_ir(ir / "penguin.py")["traced_dma_count"] == 36


def test_binding_moves_no_line_but_after_a_compound_first_statement_and_refuses_unknown_tunables():
    source = "@jit\ndef k(a, b,\n      t=1, *, u='x'):\n    for i in range(t):\n        pass\n    return a\n"
    bound = specialise(source, "k", {"u": "y"})
    assert bound.splitlines()[1:3] == ["def k(a, b, t=1", "):"]  # the signature keeps its two lines
    assert "    u = 'y'\n    for i in range(t):" in bound  # a compound first statement gets its own line
    simple = specialise("def k(a, t=1):\n    x = t\n    return x\n", "k", {"t": 4})
    assert simple == "def k(a):\n    t = 4; x = t\n    return x\n"
    with pytest.raises(TraceError) as info:
        specialise(source, "k", {"tile": 2})
    assert "takes no tunable tile" in str(info.value)


def test_a_definition_without_tunables_hands_the_kernel_itself(host, tmp_path):
    calls = host("driver_0700")
    run(tmp_path / "work", kernel=None, point=LEGACY_TUNED.model_copy(update={"tunables": {}, "platform": "trn2"}))
    assert recorded(calls)["compile_to_bir"]["kernel_func"] == VectorAdd.nki_kernel
