"""Spec loading, grid expansion, and the one-line errors for every bad-input class."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from kernelsweep.errors import UsageError
from kernelsweep.sweepspec.expansion import count_points, expand, expand_spec
from kernelsweep.sweepspec.load import load_spec
from kernelsweep.sweepspec.point import Point

GOOD = """
name = "t"
platforms = ["trn2"]
[[kernels]]
kernel = "kernelsweep.kernels.mlp:mlp"
grid = { s = [128, 256], h = [1024], i = [512] }
"""


def _spec(tmp_path, body):
    path = tmp_path / "spec.toml"
    path.write_text(body)
    return path


def test_full_grid_expansion_in_axis_order(tmp_path):
    spec = load_spec(_spec(tmp_path, GOOD.replace('["trn2"]', '["trn2", "trn1"]')))
    points = expand(spec)
    assert [(p.shape, p.platform) for p in points] == [
        ("b=1,s=128,h=1024,i=512", "trn2"),
        ("b=1,s=128,h=1024,i=512", "trn1"),
        ("b=1,s=256,h=1024,i=512", "trn2"),
        ("b=1,s=256,h=1024,i=512", "trn1"),
    ]
    assert points[0].lnc == 2 and points[1].lnc == 1  # trn2 defaults to LNC=2
    assert spec.capture.profile_nth_exec is None  # every num_exec-th execution: one NTFF


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s.replace('"trn2"', '"trn9"'),
            "unknown platform 'trn9' at platforms[0]; use one of trn1, trn2, inf2, trn3",
        ),
        (
            lambda s: s.replace("kernelsweep.kernels.mlp:mlp", "nosuch.module:k"),
            "kernels[0]: cannot import kernel 'nosuch.module:k' (No module named 'nosuch')",
        ),
        (lambda s: s.replace("kernelsweep.kernels.mlp:mlp", "kernelsweep.kernels.mlp:nope"), "has no attribute 'nope'"),
        (lambda s: s.replace("kernelsweep.kernels.mlp:mlp", "kernels.faulty:not_a_kernel"), "not a KernelDefinition"),
        (
            lambda s: s.replace("s = [128, 256]", "s = []"),
            "kernels[0].grid: axis 's' is empty; give it at least one value",
        ),
        (
            lambda s: s.replace("s = [128, 256]", "s = [128], q = [1]"),
            "kernel mlp takes no axis 'q'; its axes are b, s, h, i",
        ),
        (lambda s: s.replace("s = [128, 256], ", ""), "axis 's' of kernel mlp needs values"),
        (lambda s: "colour = 'red'\n" + s, "unknown key 'colour'; remove it or check its spelling"),
        (lambda s: s.replace("[[kernels]]", "[capture]\nwarmup = 3\n[[kernels]]"), "unknown key 'capture.warmup'"),
        (lambda s: s.replace("i = [512]", "i = [200000]"), "h=1024 and i=200000 need 402176 bytes of SBUF"),
        (lambda s: s.replace('platforms = ["trn2"]', ""), "missing required key 'platforms'; add it"),
        (
            lambda s: s.replace("[[kernels]]", "[capture]\nnum_exec = 1\nprofile_nth_exec = 2\n[[kernels]]"),
            "profile_nth_exec=2 is past num_exec=1",
        ),
        (lambda s: s.replace("grid =", 'dtypes = ["int8"]\ngrid ='), "unknown dtype 'int8'"),
        (lambda s: s.replace("name = ", "name = = "), "not valid TOML"),
        (  # strict types: a quoted number or a boolean is named, never coerced
            lambda s: s.replace("[[kernels]]", '[capture]\nnum_exec = "10"\n[[kernels]]'),
            "capture.num_exec is '10' (text); give a whole number, without quotes",
        ),
        (
            lambda s: s.replace("s = [128, 256]", "s = [true]"),
            "kernels[0].grid.s[0] is True (a boolean); give a whole number, without quotes",
        ),
        (lambda s: s.replace("[[kernels]]", "seed = 1.0\n[[kernels]]"), "seed is 1.0 (a decimal number)"),
        (lambda s: "\ufeff" + s, "starts with a byte-order mark; save it as UTF-8 without BOM"),
    ],
)
def test_bad_spec_is_one_clear_line(tmp_path, edit, message):
    path = _spec(tmp_path, edit(GOOD))
    with pytest.raises(UsageError) as info:
        expand(load_spec(path), source=str(path))
    text = str(info.value)
    assert message in text
    assert "\n" not in text and text.startswith(str(path))


def test_partition_over_128_is_dropped_with_its_reason_and_the_rest_kept(tmp_path):
    body = """
name = "va"
platforms = ["trn2"]
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [25600], partition_size = [128, 256] }
"""
    expansion = expand_spec(load_spec(_spec(tmp_path, body)))
    assert [p.params["partition_size"] for p in expansion.points] == [128]
    assert expansion.drops.total == 1
    assert "number of partitions 256 exceeds the architecture limit of 128" in next(
        iter(expansion.drops.examples.values())
    )
    only_bad = body.replace("[128, 256]", "[256]")
    with pytest.raises(UsageError, match="no valid point is left.*number of partitions 256 exceeds the architecture"):
        expand(load_spec(_spec(tmp_path, only_bad)))


def test_missing_spec_file(tmp_path):
    with pytest.raises(UsageError, match="no such spec file"):
        load_spec(tmp_path / "absent.toml")


def test_validate_cli_exits_2_with_one_line(tmp_path):
    path = _spec(tmp_path, GOOD.replace('"trn2"', '"trn9"'))
    proc = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown platform 'trn9'" in lines[0]


def test_validate_cli_lists_points(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "validate", str(_spec(tmp_path, GOOD))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 points" in proc.stdout and "mlp-b-1-s-256-h-1024-i-512-bfloat16-trn2" in proc.stdout


# --- Bad input that used to cost minutes, gigabytes or duplicate rows (docs/reliability.md) ---------


VECTOR_GRID = """
name = "many"
platforms = ["trn2"]
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = {{ n = {n}, partition_size = [1, 2, 4, 8, 16, 32, 64, 128], free_size = [1, 2, 4, 8] }}
"""


def test_validate_of_a_big_grid_checks_every_point_and_keeps_none(tmp_path):
    """`validate --max-points 1000000` used to build every point (1.8 GB, over 300 s): above 1,000 points
    each is checked one at a time and counted, none kept, and the same points are valid as in a run."""
    from kernelsweep.sweepspec.expansion import count_spec

    spec = load_spec(_spec(tmp_path, VECTOR_GRID.format(n=[128 * k for k in range(1, 41)])))
    counted = count_spec(spec, "spec.toml", max_points=2000)
    assert counted.points == [] and all(plan.points == [] for plan in counted.blocks)
    valid = len(expand_spec(spec, max_points=2000).points)
    assert sum(plan.valid["float32"] for plan in counted.blocks) == valid
    assert counted.drops.total == count_points(spec) - valid > 0  # dropped with their reasons, not refused
    proc = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "validate", "spec.toml", "--max-points", "2000"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"many: {valid:,} points, every one checked" in proc.stdout
    assert "vector_add-n-" not in proc.stdout  # counted, not listed one per line


def test_a_huge_grid_is_refused_by_counting_before_any_point_or_import(tmp_path):
    """10^18 points: counted from the list lengths, refused at once; the kernel is never even imported."""
    axis = list(range(1, 1001))
    body = GOOD.replace("kernelsweep.kernels.mlp:mlp", "never.imported:k").replace(
        "grid = { s = [128, 256], h = [1024], i = [512] }",
        f"grid = {{ b = {axis}, s = {axis}, h = {axis}, i = {axis}, x = {axis}, y = {axis} }}",
    )
    spec = load_spec(_spec(tmp_path, body))
    assert count_points(spec) == 1000**6
    started = time.perf_counter()
    with pytest.raises(UsageError, match=r"expands to 1,000,000,000,000,000,000 points, over the limit of 10,000"):
        expand(spec)
    assert time.perf_counter() - started < 1.0
    with pytest.raises(UsageError, match="--max-points 1000000000000000000"):
        expand(spec)


def test_max_points_lets_a_large_grid_through(tmp_path):
    spec = load_spec(_spec(tmp_path, GOOD.replace("s = [128, 256]", "s = [128, 256, 512]")))
    with pytest.raises(UsageError, match="expands to 3 points, over the limit of 2"):
        expand(spec, max_points=2)
    assert len(expand(spec, max_points=3)) == 3


def test_repeated_values_platforms_dtypes_and_kernel_blocks_are_swept_once_with_a_notice(tmp_path):
    body = GOOD.replace('["trn2"]', '["trn2", "trn2"]').replace("s = [128, 256]", "s = [128, 256, 128]")
    body = body.replace("grid = {", 'dtypes = ["bfloat16", "bfloat16"]\ngrid = {')
    body += '[[kernels]]\nkernel = "kernelsweep.kernels.mlp:mlp"\ngrid = { s = [256, 512], h = [1024], i = [512] }\n'
    expansion = expand_spec(load_spec(_spec(tmp_path, body)), source="spec.toml")
    ids = [p.point_id for p in expansion.points]
    assert len(ids) == len(set(ids)) == 3  # s=128, 256, 512 on trn2: nothing twice
    assert expansion.notices == [
        "spec.toml: platforms lists trn2 twice; swept once",
        "spec.toml: kernels[0].dtypes lists bfloat16 twice; swept once",
        "spec.toml: kernels[0].grid.s lists 128 twice; swept once",
        "spec.toml: kernels[1] repeats 1 point(s) listed before it; each is swept once",
    ]


def test_two_kernels_with_one_name_are_refused(tmp_path):
    (tmp_path / "alias.py").write_text(
        "from kernelsweep.kernels.mlp import MLP\n\nclass Other(MLP):\n    pass\n\nmlp = Other()\n"
    )
    body = GOOD + '[[kernels]]\nkernel = "alias:mlp"\ngrid = { s = [128], h = [1024], i = [512] }\n'
    sys.path.append(str(tmp_path))
    try:
        with pytest.raises(UsageError, match="are both named 'mlp', so their rows would share ids"):
            expand(load_spec(_spec(tmp_path, body)))
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("[capture]\ntimeout_seconds = inf\n", "capture.timeout_seconds is inf; give a finite number"),
        ("[capture]\ntimeout_seconds = 1e300\n", "capture.timeout_seconds=1e+300 is over a week"),
        ("[capture]\ntimeout_seconds = nan\n", "capture.timeout_seconds: Input should be greater than 0"),
        ('results = "out\\u0000x"\n', "results must be a folder path or s3:// URI of 1 to 1024 printable"),
        ('artifacts = ""\n', "artifacts must be a folder path or s3:// URI"),
    ],
)
def test_non_finite_and_absurd_settings_are_one_line(tmp_path, edit, message):
    head, kernels = GOOD.split("[[kernels]]")
    top, table = (edit, "") if not edit.startswith("[") else ("", edit)
    with pytest.raises(UsageError, match=re.escape(message)):
        load_spec(_spec(tmp_path, top + head + table + "[[kernels]]" + kernels))


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ("s = [-128]", "kernels[0].grid.s has -128, out of range; axis values are 0 to 2147483647"),
        ("s = [4294967296]", "kernels[0].grid.s has 4294967296, out of range"),
        ("s = [1073741824]", "needs 4096.0 GiB of inputs and outputs, more than trn2's 96 GiB"),
    ],
)
def test_out_of_range_shapes_are_refused_before_any_memory_is_spent(tmp_path, grid, message):
    body = GOOD.replace(
        "s = [128, 256], h = [1024], i = [512]", grid if "h =" in grid else grid + ", h = [1024], i = [512]"
    )
    with pytest.raises(UsageError, match=re.escape(message)):
        expand(load_spec(_spec(tmp_path, body)))


def test_a_shape_whose_kernel_unrolls_too_far_is_refused_naming_the_axis_to_shrink():
    """NKI unrolls every loop: an 8192^3 matmul is ~200,000 instructions in straight-line code, which
    would hold a compile slot until its timeout (real-host audit 2, N5). Refused before any work."""
    from kernelsweep.sweepspec.load import parse_spec

    def spec(m: int, **execution: int) -> dict:
        grid = {"M": [m], "K": [8192], "N": [8192]}
        kernels = [{"kernel": "matmul", "dtypes": ["bfloat16"], "grid": grid}]
        return {"name": "big", "platforms": ["trn2"], "kernels": kernels, "execution": execution}

    with pytest.raises(UsageError) as info:
        expand(parse_spec(spec(8192)), "big.toml")
    assert str(info.value) == (
        "big.toml: no valid point is left: the kernels' rules, the platforms and the filters drop all 1; 1 of "
        "them: M=8192,K=8192,N=8192 bfloat16 trn2 lnc=2: unrolls to about 137,216 instructions (NKI unrolls "
        "every loop), over execution.max_unrolled_instructions=100,000; shrink M; `kernelsweep validate` lists "
        "every reason"
    )
    assert len(expand(parse_spec(spec(2048)))) == 1  # 34,304 instructions
    assert len(expand(parse_spec(spec(8192, max_unrolled_instructions=200_000)))) == 1


BAD_NAMES = """
from kernelsweep.kernels.vector_add import VectorAdd
from kernelsweep.kernels.base import TensorInfo

class SlashName(VectorAdd):
    name = "../../etc/evil"

class SlashTensor(VectorAdd):
    name = "slash_tensor"
    def input_infos(self, params, dtype):
        return [TensorInfo("../x", (128, 16), dtype)]

class OddAxis(VectorAdd):
    name = "odd_axis"
    axes = ("n", "partition size", "free_size")

slash_name, slash_tensor, odd_axis = SlashName(), SlashTensor(), OddAxis()
"""


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("badnames:slash_name", "kernel name '../../etc/evil' cannot name files and keys"),
        ("badnames:slash_tensor", "tensor name '../x' of slash_tensor cannot name a file"),
        ("badnames:odd_axis", "axis name 'partition size' of kernel odd_axis is not an identifier"),
    ],
)
def test_names_that_become_paths_or_keys_are_checked(tmp_path, ref, message):
    (tmp_path / "badnames.py").write_text(BAD_NAMES)
    body = f"""
name = "t"
platforms = ["trn2"]
[[kernels]]
kernel = "{ref}"
dtypes = ["float32"]
grid = {{ n = [2048] }}
"""
    sys.path.append(str(tmp_path))
    try:
        with pytest.raises(UsageError, match=re.escape(message)):
            expand(load_spec(_spec(tmp_path, body)))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("badnames", None)


def test_a_spec_that_is_a_folder_binary_or_huge_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="is a folder, not a spec file"):
        load_spec(tmp_path)
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(UsageError, match="not a text file"):
        load_spec(tmp_path / "bin.toml")
    (tmp_path / "big.toml").write_bytes(b"#" * (2 << 20))
    with pytest.raises(UsageError, match="too large for a sweep spec"):
        load_spec(tmp_path / "big.toml")
    (tmp_path / "deep.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(UsageError, match="nested too deeply|not valid TOML"):
        load_spec(tmp_path / "deep.toml")


def test_a_point_too_big_for_this_host_is_refused_when_the_host_is_known(tmp_path):
    body = GOOD.replace("s = [128, 256], h = [1024]", "s = [65536], h = [2048]")
    spec = load_spec(_spec(tmp_path, body + "\n[execution]\nmax_unrolled_instructions = 1000000\n"))
    assert len(expand(spec)) == 1  # fits a trn2; whether it fits this host depends on the host
    with pytest.raises(UsageError, match="more than this host's 1 GiB of memory"):
        expand(spec, host_memory_bytes=1 << 30)


def test_a_point_whose_json_comes_back_with_its_keys_reordered_keeps_its_shape_and_id():
    """A Prefect server on PostgreSQL keeps a shard's parameters as jsonb, which returns an object's keys
    sorted by length: the shard's rows must still name the shapes and ids the fleet planned."""
    point = Point(
        sweep="s", kernel="matmul", kernel_ref="m:k", params={"n": 2048, "partition_size": 128, "free_size": 16},
        dtype="float32", platform="trn2", lnc=2, seed=3, tunables={"tile_n": 256, "loop_order": "nm"},
    )  # fmt: skip
    stored = json.loads(point.model_dump_json())
    for field in ("params", "tunables"):
        stored[field] = dict(sorted(stored[field].items(), key=lambda kv: (len(kv[0]), kv[0])))  # jsonb's order
    assert list(stored["params"]) != list(point.params)  # the store did reorder them
    back = Point.model_validate(stored)
    assert (back.shape, back.tunables_text, back.point_id) == (point.shape, point.tunables_text, point.point_id)
    assert back == point
