"""A state folder on a full disk (issue 41): a tmpfs mounted in a mount namespace of the test's own (as in
tests/test_tmpdir_full.py), filled, and `kernelsweep run` started with KERNELSWEEP_STATE_DIR on it. Was:
"internal error: OSError: [Errno 28] No space left on device" (exit 4, the simulator's session write);
now one line naming the folder and the fix, exit 2, before any work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_tmpdir_full import SPEC, _cannot_mount

# In the namespace: a private tmpfs (mode 0700: a state folder must be), filled, then the command.
SCRIPT = """
mount -t tmpfs -o size=1m,mode=0700 tmpfs "$STATE" || exit 97
head -c 4M /dev/zero > "$STATE/fill" 2>/dev/null
"$@"
"""


def test_a_full_state_folder_is_one_line_and_exit_2_before_any_work(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    if reason := _cannot_mount(state):
        pytest.skip(reason)
    (tmp_path / "spec.toml").write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_", "KERNELSWEEP_"))}
    env |= {"STATE": str(state), "KERNELSWEEP_STATE_DIR": str(state), "PREFECT_HOME": str(tmp_path / "prefect")}
    command = [sys.executable, "-m", "kernelsweep.flows.cli", "run", "spec.toml", "--results", "results"]
    proc = subprocess.run(["unshare", "-m", "sh", "-c", SCRIPT, "sh", *command], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"error: simulator state folder {state}/sim has 0.0 MiB free, under the 4 MiB a run needs; free space there "
        "or set KERNELSWEEP_STATE_DIR to a folder with room\n"
    )
    assert not (tmp_path / "results").exists()
