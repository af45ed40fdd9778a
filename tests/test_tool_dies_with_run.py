"""A run killed outright (SIGKILL: no handler, no cleanup) while a tool hangs: the tool goes with it.

Tools run in sessions of their own (so a timeout can kill all they spawn, and a Ctrl-C in the
terminal reaches only the CLI); without a parent-death signal a hung capture would then outlive the
run for as long as it hangs, holding its NeuronCore. The simulated capture hangs (an injected
capture-timeout) under a capture timeout of 10 minutes; the test finds it by a marker in its
environment, kills the CLI alone, and polls until no process with the marker is left (the run's own
Prefect server carries it too, and must go as well).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = """
name = "hung"
platforms = ["trn2"]
[capture]
num_exec = 2
timeout_seconds = 600
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [4096], free_size = [1] }
"""
START_TIMEOUT_S = 240
GONE_TIMEOUT_S = 30


def _marked(marker: str) -> dict[int, str]:
    """pid -> command line of every process whose environment holds the marker."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours to read
            continue
    return found


def _hung_capture(marker: str, cli: subprocess.Popen) -> int:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert cli.poll() is None, cli.communicate()
        tools = [
            pid for pid, cmd in _marked(marker).items() if "kernelsweep.sim.neuron_" in cmd and " capture -n " in cmd
        ]
        if tools:
            return tools[0]
        time.sleep(0.2)
    raise AssertionError(f"no capture started within {START_TIMEOUT_S} s")


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_hung_tool_dies_with_a_run_killed_outright(tmp_path, prefect_home):
    (tmp_path / "spec.toml").write_text(SPEC)
    marker = f"KERNELSWEEP_TEST_MARKER={uuid.uuid4()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_"))}
    env |= {
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "KERNELSWEEP_STATE_DIR": str(tmp_path / "state"),
        "KERNELSWEEP_SIM_FAULTS": "capture-timeout=1",
        "KERNELSWEEP_TEST_MARKER": marker.split("=", 1)[1],
    }
    cli = subprocess.Popen(
        [sys.executable, "-m", "kernelsweep.flows.cli", "run", "spec.toml", "--results", "out"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        tool = _hung_capture(marker, cli)
        assert os.getsid(tool) != os.getsid(cli.pid)  # its own session: a group kill of the CLI misses it
        cli.kill()
        cli.wait(timeout=30)
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _marked(marker), f"left running after the run was killed: {_marked(marker)}"
    finally:
        for pid in _marked(marker):  # only what this test started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if cli.poll() is None:
            cli.kill()
