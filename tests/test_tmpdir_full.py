"""A TMPDIR that is really full: a tmpfs mounted in a mount namespace of the test's own (`unshare -m`,
so the mount dies with the process however the test ends), filled to its last byte, and
`kernelsweep run` started under it. Before the check (flows/cli/checks.py) this surfaced after about
200 s as "internal error: timed out ... ephemeral Prefect API server"; now it is one line naming the
folder and the fix, exit 2, before Prefect starts, and nothing is written anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = """
name = "full-tmp"
platforms = ["trn2"]
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [4096] }
"""
# In the namespace: mount, fill (head stops at ENOSPC), say what is free, run, list what the run left.
SCRIPT = """
mount -t tmpfs -o size=8m tmpfs "$TMPDIR" || exit 97
head -c 16M /dev/zero > "$TMPDIR/fill" 2>/dev/null
df -B1 --output=avail "$TMPDIR" | tail -n 1 > "$OUT/avail"
"$@"
code=$?
ls -A "$TMPDIR" > "$OUT/left"
exit $code
"""


def _cannot_mount(folder: Path) -> str | None:
    """Why a private tmpfs cannot be mounted here, or None."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "mounting a tmpfs in a private mount namespace needs root and util-linux's unshare"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$1"', "sh", str(folder)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return f"cannot mount a tmpfs here: {probe.stderr.strip()}" if probe.returncode else None


def test_a_full_tmpdir_is_one_line_and_exit_2_before_prefect_starts(tmp_path: Path) -> None:
    temp, out = tmp_path / "tmp", tmp_path / "out"
    temp.mkdir()
    out.mkdir()
    if reason := _cannot_mount(temp):
        pytest.skip(reason)
    (tmp_path / "spec.toml").write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_", "KERNELSWEEP_"))}
    env |= {"TMPDIR": str(temp), "OUT": str(out), "PREFECT_HOME": str(tmp_path / "prefect")}
    env |= {"KERNELSWEEP_STATE_DIR": str(tmp_path / "state"), "KERNELSWEEP_SIM_STATE": str(tmp_path / "sim")}
    command = [sys.executable, "-m", "kernelsweep.flows.cli", "run", "spec.toml", "--results", "results"]
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", SCRIPT, "sh", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert (out / "avail").read_text().strip() == "0", "the tmpfs was not filled"
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"error: temporary folder {temp} (TMPDIR) has 0.0 MiB free, under the 64 MiB a run needs; "
        "free space there or point TMPDIR at another folder\n"
    )
    assert proc.stdout == ""
    assert (out / "left").read_text().split() == ["fill"]  # the run left nothing in TMPDIR
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"tmp", "out", "spec.toml"}, left  # no results, state, Prefect home or sim state
