"""The simulator's record of what it was configured to sleep (sim.latency), and the lower bound a
benchmark builds from it: through the production adapters, as a sweep runs the tools."""

from __future__ import annotations

import pytest

from kernelsweep.kernels import load_kernel
from kernelsweep.sim.capture import LOAD_SECONDS
from kernelsweep.sim.latency import CAPTURE, COMPILE, lower_bound, point_key, read_latencies
from kernelsweep.sim.model import compile_seconds, predict
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.sim.views import workload
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import compiler, profiler, tracing
from kernelsweep.toolchain.neff import read_neff

POINT = Point(
    sweep="t",
    kernel="vector_add",
    kernel_ref="kernelsweep.kernels.vector_add:vector_add",
    params={"n": 2048, "partition_size": 128, "free_size": 1},
    dtype="float32",
    platform="trn2",
    lnc=2,
    seed=0,
)
SCALE = 0.01  # the records hold modelled seconds; the sleeps stay short


def _key(point: Point) -> str:
    return point_key(point.kernel_ref, point.params, point.dtype, point.platform, point.lnc)


def _trace(toolchain, point: Point, workdir):
    request = tracing.TraceRequest.for_point(point, load_kernel(point.kernel_ref), point.platform)
    return tracing.trace(toolchain, request, workdir, tracer=None, timeout_seconds=120)


def test_a_trace_and_a_capture_record_the_modelled_seconds_they_sleep(tmp_path):
    sim = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_TIME_SCALE": str(SCALE)})
    neff = _trace(sim, POINT, tmp_path / "trace").neff_path
    assert neff is not None
    arrays = load_kernel(POINT.kernel_ref).build_inputs(POINT.params, POINT.dtype, POINT.seed)
    inputs = {}
    for name, array in arrays.items():
        inputs[name] = tmp_path / f"inp-{name}-000.bin"
        inputs[name].write_bytes(array.tobytes())
    profiler.capture(sim, neff, inputs, tmp_path, num_exec=3, profile_nth_exec=None, visible_cores="0", lnc=2,
                     timeout_seconds=120)  # fmt: skip

    records = read_latencies(tmp_path / "state")
    ir = read_neff(neff).neff["kernelsweep_sim"]
    assert [(r.tool, r.point, r.time_scale) for r in records] == [
        (COMPILE, _key(POINT), SCALE),
        (CAPTURE, _key(POINT), SCALE),
    ]
    assert records[0].modelled_seconds == pytest.approx(compile_seconds(ir["flops"]))
    assert records[1].modelled_seconds == pytest.approx(LOAD_SECONDS + 3 * predict(workload(ir)).total)
    assert records[1].slept_seconds == pytest.approx(records[1].modelled_seconds * SCALE)


def test_the_legacy_compiler_records_its_compile(tmp_path):
    legacy = sim_toolchain(tmp_path / "state", env={"KERNELSWEEP_SIM_NKI": "legacy"})
    point = POINT.model_copy(update={"kernel_ref": "kernels.legacy:legacy_vector_add", "platform": "trn1", "lnc": 1})
    ir = tracing.unpack(_trace(legacy, point, tmp_path / "trace").ir_path, tmp_path / "ir")
    assert read_latencies(tmp_path / "state") == []  # the legacy trace compiles nothing
    compiler.compile_ir(legacy, ir / "penguin.py", ir, "trn1", None, timeout_seconds=60)
    (record,) = read_latencies(tmp_path / "state")
    assert (record.tool, record.point, record.time_scale) == (COMPILE, _key(point), 0.0)
    assert record.modelled_seconds > 0 and record.slept_seconds == 0  # modelled, though nothing is slept at scale 0


@pytest.mark.parametrize(
    ("compiles", "captures", "slots", "cores", "bound"),
    [
        ([4.0] * 4, [1.0] * 4, 2, 4, 4 * 4 / 2 + 1),  # compile-bound: two waves of compiles, then one capture
        ([1.0] * 4, [4.0] * 4, 2, 2, 1 + 4 * 4 / 2),  # capture-bound: the first compile, then the captures
        ([3.0, 1.0], [2.0, 0.5], 1, 1, max(4 + 0.5, 1 + 2.5)),  # the shortest of each term, not the first
        ([], [], 2, 4, 0.0),
    ],
)
def test_the_lower_bound_takes_the_slower_resource_plus_the_least_it_cannot_overlap(
    compiles, captures, slots, cores, bound
):
    assert lower_bound(compiles, captures, slots, cores) == pytest.approx(bound)
