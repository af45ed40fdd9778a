"""Scratch folders are owned (issue 41): a stage killed mid-way leaves its `kernelsweep-<stage>-*` folder
(a capture's NEFF, inputs and repeats), and the next run on the host removes it, never a live
process's; `doctor` says how much is left. The processes here are real: one killed with SIGKILL
while it holds a capture folder, one alive holding another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

HOLD = textwrap.dedent(
    """
    import sys
    from kernelsweep.this_host.scratch import scratch
    with scratch("capture") as folder:
        (folder / "file.neff").write_bytes(b"x" * 300_000)
        print(folder, flush=True)
        sys.stdin.read()
    """
)


@pytest.fixture
def holders(tmp_path):
    started: list[subprocess.Popen] = []

    def hold() -> tuple[subprocess.Popen, Path]:
        proc = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env={**os.environ, "TMPDIR": str(tmp_path)})  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        return proc, Path(proc.stdout.readline().strip())

    yield hold
    for proc in started:
        proc.kill()
        proc.communicate()  # waits, and closes its pipes


def test_the_next_run_removes_a_killed_captures_folder_and_never_a_live_ones(tmp_path, holders, monkeypatch):
    from kernelsweep.doctor import host_checks
    from kernelsweep.flows.cli.bench import bench

    killed, dead = holders()
    alive, live = holders()
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert dead.is_dir() and live.is_dir()  # a kill leaves the folder behind
    reused = tmp_path / "kernelsweep-capture-reused"  # its pid lives on in another process now
    reused.mkdir()
    (reused / ".kernelsweep-owner").write_text(f"{alive.pid} 1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    found = host_checks._scratch(host_checks.Host(temp_dir=tmp_path))
    assert found.status == "warn" and found.found.startswith("3 folder(s), 0.6 MiB, 2 of runs that died")

    args = ["vector_add", "--shape", "n=2048", "--toolchain", "sim", "--artifacts", str(tmp_path / "artifacts")]
    done = CliRunner().invoke(bench, args)
    assert done.exit_code == 0, done.output
    assert not dead.exists() and not reused.exists() and live.is_dir()
    assert sorted(p.name for p in tmp_path.glob("kernelsweep-*")) == [live.name]  # the bench's own are gone too
    assert host_checks._scratch(host_checks.Host(temp_dir=tmp_path)).found.startswith(
        "1 folder(s), 0.3 MiB, 0 of runs that died"
    )


# The SDK's interpreter, as the probe finds it in a venv: one that starts and never answers.
SILENT_SDK_PYTHON = '#!/bin/sh\necho $$ > "{started}.new" && mv "{started}.new" "{started}"\nexec sleep 300\n'


@pytest.mark.slow
def test_a_run_killed_while_it_probes_the_tracers_leaves_a_folder_the_next_run_removes(tmp_path):
    """The tracer probe at a run's start works in an owned scratch folder too: a bare temporary folder
    before, which every run killed during its probe left behind for good."""
    from prefect_server import poll

    from kernelsweep.this_host import scratch

    started, python, temp = tmp_path / "started", tmp_path / "sdk-python", tmp_path / "tmp"
    python.write_text(SILENT_SDK_PYTHON.format(started=started))
    python.chmod(0o755)
    temp.mkdir()
    argv = [str(Path(sys.executable).parent / "kernelsweep"), "bench", "vector_add", "--shape", "n=2048",
            "--toolchain", "cpu", "--artifacts", str(tmp_path / "artifacts")]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(temp), "KERNELSWEEP_NEURON_PYTHON": str(python)}
    run = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        silent = int(poll(lambda: started.is_file() and started.read_text(), timeout=120, what="the probe's worker"))
        run.send_signal(signal.SIGKILL)  # mid-probe: its worker has started and not answered
        run.wait()
        os.kill(silent, signal.SIGKILL)  # a stand-in: a real worker arms its own parent-death signal
    finally:
        run.kill()
        run.wait()

    [left] = temp.glob("kernelsweep-probe-*")
    assert (left / scratch.MARK).is_file()  # owned, by a process that is gone
    assert scratch.remove_orphans(temp) == 1 and not left.exists()
