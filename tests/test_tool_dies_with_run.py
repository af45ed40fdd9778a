"""A run killed outright (SIGKILL: no handler, no cleanup) while a tool hangs: the tool goes with it.

Tools run in sessions of their own (so a timeout can kill all they spawn, and a Ctrl-C in the
terminal reaches only the CLI); without a parent-death signal a hung capture would then outlive the
run for as long as it hangs, holding its NeuronCore. The simulated capture hangs (an injected
capture-timeout) under a capture timeout of 10 minutes; the test finds it by a marker in its
environment, kills the CLI alone, and polls until no process with the marker is left (the run's own
Prefect server carries it too, and must go as well).

kernelsweep's own entry points (the simulator's tools, the trace worker) arm the signal themselves and
start without the launcher interpreter; a foreign tool still gets the launcher. A run process that
holds one of each, hung, is killed the same way, and all three must go with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kernelsweep.sim.latency import CAPTURE, COMPILE, read_latencies
from kernelsweep.toolchain.parent_death import PARENT_ENV

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


linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")


@pytest.mark.slow
@linux_only
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
    with _reaped(cli, marker):
        tool = _hung_capture(marker, cli)
        assert os.getsid(tool) != os.getsid(cli.pid)  # its own session: a group kill of the CLI misses it
        _killed_outright(cli, marker)


def _killed_outright(run: subprocess.Popen, marker: str) -> None:
    """SIGKILL the run alone; every process carrying the marker must be gone soon after."""
    run.kill()
    run.wait(timeout=30)
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _marked(marker), f"left running after the run was killed: {_marked(marker)}"


@contextmanager
def _reaped(run: subprocess.Popen, marker: str) -> Iterator[None]:
    """Whatever the test's outcome, nothing it started is left running (only processes with its marker)."""
    try:
        yield
    finally:
        for pid in _marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if run.poll() is None:
            run.kill()


# A run that holds three hung tools: a capture (a simulated tool, `-P -m`), a trace worker (`-c`, its
# modelled compile slept at a huge time scale) and a foreign tool (a plain Python sleeping).
HUNG_SCALE = 100_000.0  # the modelled latencies' time scale: hours for a capture or a compile
HUNG_TOOLS = """
import sys, threading
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from stage_context import point, sim_context
from kernelsweep import stages
from kernelsweep.toolchain.process import run_tool

root = Path(sys.argv[1])
ready = sim_context(root)
p = point()
compiled = stages.compile_stage(ready, p, stages.trace_stage(ready, p))
inputs = stages.inputs_stage(ready, p)
hung = sim_context(root, env={"KERNELSWEEP_SIM_TIME_SCALE": sys.argv[3]})
for work in (
    lambda: stages.capture_stage(hung, p, compiled, inputs),
    lambda: stages.trace_stage(hung, point(n=4096)),
    lambda: run_tool([sys.executable, "-c", "import time; time.sleep(600)"], timeout_seconds=600),
):
    threading.Thread(target=work).start()
"""


KINDS = {"capture": " capture -n ", "trace worker": "tracing.worker", "foreign": "time.sleep(600)"}  # in its argv


def _environ(pid: int) -> dict[str, str]:
    entries = (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0")
    return dict(e.decode(errors="replace").partition("=")[::2] for e in entries if b"=" in e)


def _hung(marker: str, run: subprocess.Popen, sim_state: Path) -> dict[str, int]:
    """The three tools' pids, once the simulated two are asleep in their modelled latency."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        found = {}
        for pid, cmd in _marked(marker).items():
            if pid == run.pid:
                continue
            kind = next((k for k, part in KINDS.items() if part in cmd), None)
            if kind:
                found[kind] = pid
        slept = [r.tool for r in read_latencies(sim_state) if r.time_scale == HUNG_SCALE]
        if len(found) == len(KINDS) and sorted(slept) == [CAPTURE, COMPILE]:
            return found
        time.sleep(0.2)
    raise AssertionError(f"the three tools did not hang within {START_TIMEOUT_S} s: {_marked(marker)}")


@linux_only
def test_own_tools_start_without_the_launcher_and_still_die_with_a_run_killed_outright(tmp_path):
    marker = str(uuid.uuid4())
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSWEEP_")} | {
        "KERNELSWEEP_TEST_MARKER": marker
    }
    run = subprocess.Popen(
        [sys.executable, "-c", HUNG_TOOLS, str(tmp_path), str(Path(__file__).parent), str(HUNG_SCALE)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    with _reaped(run, marker):
        tools = _hung(marker, run, tmp_path / "sim")
        told = {kind: _environ(pid).get(PARENT_ENV) for kind, pid in tools.items()}
        # kernelsweep's own tools were started as they are and told the run's pid; the foreign one
        # went through the launcher (the launcher execs the tool, so the pid is the tool's)
        assert told == {"capture": str(run.pid), "trace worker": str(run.pid), "foreign": None}
        assert all(os.getsid(pid) != os.getsid(run.pid) for pid in tools.values())  # group kills miss them
        _killed_outright(run, marker)


def test_which_commands_arm_the_signal_themselves(tmp_path):
    """run_tool tells these the run's pid instead of starting them through the launcher: a forked
    tool's command (whatever module it runs: the command arms it), kernelsweep's own modules under
    `python -P -m`, a worker's bootstrap code; never another module or a foreign tool."""
    from kernelsweep.sim.toolchain import sim_toolchain
    from kernelsweep.toolchain.iterations import BOOTSTRAP
    from kernelsweep.toolchain.parent_death import arms_itself

    sim = sim_toolchain(tmp_path / "sim")
    assert all(arms_itself(sim.command(tool)) for tool in ("neuronx-cc", "neuron-profile", "neuron-ls"))
    assert arms_itself([*sim.command("neuron-ls")[:4], "http.server"])  # forked: its command arms it
    assert arms_itself([sys.executable, "-P", "-m", "kernelsweep.sim.neuron_ls", "--version"])
    assert arms_itself([sys.executable, "-c", BOOTSTRAP, "folder", "job.json"])
    assert not arms_itself([sys.executable, "-P", "-m", "http.server"])
    assert not arms_itself(["/bin/sleep", "1"])
