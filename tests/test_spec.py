"""Spec loading, grid expansion, and the one-line errors for every bad-input class."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelsweep.errors import UsageError
from kernelsweep.spec import expand, load_spec

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
            "unknown platform 'trn9' at platforms.0; use one of trn1, trn2, inf2",
        ),
        (
            lambda s: s.replace("kernelsweep.kernels.mlp:mlp", "nosuch.module:k"),
            "kernels[0]: cannot import kernel 'nosuch.module:k' (No module named 'nosuch')",
        ),
        (lambda s: s.replace("kernelsweep.kernels.mlp:mlp", "kernelsweep.kernels.mlp:nope"), "has no attribute 'nope'"),
        (lambda s: s.replace("kernelsweep.kernels.mlp:mlp", "kernels.faulty:not_a_kernel"), "not a KernelDefinition"),
        (
            lambda s: s.replace("s = [128, 256]", "s = []"),
            "kernels.0.grid: axis 's' is empty; give it at least one value",
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
    ],
)
def test_bad_spec_is_one_clear_line(tmp_path, edit, message):
    path = _spec(tmp_path, edit(GOOD))
    with pytest.raises(UsageError) as info:
        expand(load_spec(path), source=str(path))
    text = str(info.value)
    assert message in text
    assert "\n" not in text and text.startswith(str(path))


def test_partition_over_128_is_rejected_before_any_work(tmp_path):
    body = """
name = "va"
platforms = ["trn2"]
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [25600], partition_size = [128, 256] }
"""
    with pytest.raises(UsageError, match="number of partitions 256 exceeds the architecture limit of 128"):
        expand(load_spec(_spec(tmp_path, body)))


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
