"""Baselines measured the same way (kernelsweep.baselines): the spec's `baseline`, the twin points,
the baseline's definition in any process, and no clock read on its way. The simulated matmul sweep
against the stand-in nki-library kernel, its paired rows and the report's speedups are in
tests/test_report_insight.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelsweep import baselines
from kernelsweep.errors import UsageError
from kernelsweep.kernels import load_kernel
from kernelsweep.sweepspec.expansion import count_points, expand_spec
from kernelsweep.sweepspec.expansion_text import describe
from kernelsweep.sweepspec.load import parse_spec

STANDIN = "nkilib:kernelsweep.kernels.nki.nkilib_matmul:matmul_kernel"
REPO = Path(__file__).resolve().parent.parent


def _spec(baseline: str = STANDIN, n: tuple[int, ...] = (1024, 2048)) -> dict:
    grid = {"M": [512], "K": [1024], "N": list(n)}
    block = {"kernel": "matmul", "grid": grid, "dtypes": ["bfloat16"], "baseline": baseline}
    return {"name": "base", "platforms": ["trn2"], "kernels": [block]}


def test_a_block_with_a_baseline_gets_a_twin_of_each_point():
    spec = parse_spec(_spec())
    points = expand_spec(spec).points
    assert count_points(spec) == len(points) == 4
    kernels = [(p.kernel, p.shape, p.baseline, p.baseline_of) for p in points]
    assert kernels == [
        ("matmul", "M=512,K=1024,N=1024", STANDIN, ""),
        ("matmul.baseline", "M=512,K=1024,N=1024", STANDIN, "matmul"),
        ("matmul", "M=512,K=1024,N=2048", STANDIN, ""),
        ("matmul.baseline", "M=512,K=1024,N=2048", STANDIN, "matmul"),
    ]
    twin = points[1]
    assert (twin.dtype, twin.platform, twin.lnc, twin.seed) == (points[0].dtype, "trn2", 2, points[0].seed)


def test_a_shapes_configurations_share_one_baseline_point_without_the_kernels_tunables():
    """The baseline takes the definition's inputs, not the kernel's tunables: one twin per shape."""
    data = _spec(n=(1024,))
    data["kernels"][0]["tunables"] = {"tile_n": [256, 512]}
    expansion = expand_spec(parse_spec(data))
    found = [(p.kernel, p.tunables) for p in expansion.points]
    assert found == [("matmul", {"tile_n": 256}), ("matmul.baseline", {}), ("matmul", {"tile_n": 512})]
    assert "  2 point(s), and 1 of its baseline (same shapes), 0 dropped" in describe(expansion)


def test_the_baselines_definition_is_the_blocks_with_the_baselines_nki_kernel():
    """What the trace worker and the simulator's tools load by the twin's kernel_ref."""
    ref = baselines.reference("kernelsweep.kernels.matmul:matmul", STANDIN)
    own, derived = load_kernel("kernelsweep.kernels.matmul:matmul"), load_kernel(ref)
    assert (
        derived.name == "matmul.baseline"
        and derived.nki_kernel == "kernelsweep.kernels.nki.nkilib_matmul:matmul_kernel"
    )
    params = {"M": 256, "K": 512, "N": 512}
    assert derived.input_infos(params, "bfloat16") == own.input_infos(params, "bfloat16")
    assert derived.cost(params, "bfloat16") == own.cost(params, "bfloat16")
    assert own.nki_kernel == "kernelsweep.kernels.nki.matmul:matmul_kernel"  # the block's own is untouched


@pytest.mark.parametrize(
    ("baseline", "says"),
    [
        ("kernelsweep.kernels.nki.nkilib_matmul:matmul_kernel", "not of the form 'nkilib:module:function'"),
        ("nkilib:only_a_module", "not of the form 'nkilib:module:function'"),
        ("nkilib:no_such_library.matmul:kernel", "cannot find the NKI kernel module 'no_such_library.matmul'"),
    ],
)
def test_a_bad_baseline_is_one_line_naming_the_fix(baseline, says):
    with pytest.raises(UsageError) as bad:
        expand_spec(parse_spec(_spec(baseline)), source="spec.toml")
    assert says in bad.value.message and "\n" not in bad.value.message


def test_no_python_timer_measures_the_baseline():
    """The baseline's latency is the profiler's, by the same stages: the modules that add it read no clock."""
    for module in ("kernelsweep/baselines.py", "kernelsweep/results/pairing.py", "kernelsweep/report/speedup.py"):
        tree = ast.parse((REPO / module).read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
        }
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not ({"time", "perf_counter", "monotonic", "timeit"} & (names | imported)), module
