"""A host's prefork server and the fleet pools' flow-run command (kernelsweep.flows.fleet.prefork and
.engine), and the simulated tools' template and command (kernelsweep.sim.template, prefork_client), as
real processes: the command is what the worker sees of a flow run, so it must end as the
engine it asked for ends, pass on the worker's signals, and take the engine with it when it is killed
outright; the server must outlive a worker killed alone until its flow runs end.

The engine here has no flow run to load: one whose API refuses connections exits 1 after a few tries,
one given a bad id at once, and one whose API never answers (a socket that listens and accepts nothing)
waits, which is the running flow run the signals are sent to. The fleet scenarios (tests/test_fleet.py,
tests/test_fleet_ops.py) run real shards through the same path, and kill a worker alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect_server import alive, poll

from kernelsweep.flows.fleet.engine import SOCKET_ENV
from kernelsweep.flows.server import descendants
from kernelsweep.sim.template import template_env
from kernelsweep.toolchain.prefork_client import TEMPLATE_ENV, fork_from_server, forked_argv
from kernelsweep.toolchain.process import run_tool

pytestmark = pytest.mark.slow  # it kills processes


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[subprocess.Popen, Path]]:
    path = tmp_path / "socket"
    process = subprocess.Popen([sys.executable, "-P", "-m", "kernelsweep.flows.fleet.prefork", str(path)])
    poll(lambda: path.exists() or None, timeout=30, what="the prefork server listening", every=0.05)
    yield process, path
    process.kill()
    process.wait()


@pytest.fixture
def silent_api() -> Iterator[str]:
    """An API URL whose server takes connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api"


def _command(path: Path, flow_run_id: str, api: str = "http://127.0.0.1:9/api", **popen) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {SOCKET_ENV: str(path), "PREFECT__FLOW_RUN_ID": flow_run_id, "PREFECT_API_URL": api}
    return subprocess.Popen([sys.executable, "-m", "kernelsweep.flows.fleet.engine"], env=env, **popen)


def _forked(server: subprocess.Popen) -> list[int]:
    return descendants(server.pid)


def test_the_command_ends_as_its_forked_engine_ends_and_passes_its_streams(server):
    """An engine whose API refuses connections tries a few times and exits 1, in a second or two."""
    process, path = server
    done = _command(path, str(uuid.uuid4()), stderr=subprocess.PIPE, text=True)
    poll(lambda: _forked(process) or None, timeout=120, what="the forked engine", every=0.02)
    _, err = done.communicate(timeout=120)
    assert done.returncode == 1 and "Connection refused" in err, err  # the engine's own exit and words
    assert "RuntimeWarning" not in err  # run as `-m prefect.engine` runs it, not beside a loaded copy
    assert process.poll() is None and not _forked(process)  # the server lives on; its child was reaped


def test_a_signal_to_the_command_reaches_the_engine_and_a_killed_command_takes_it_along(server, silent_api):
    process, path = server
    waiting = _command(path, str(uuid.uuid4()), silent_api)
    [engine] = poll(lambda: _forked(process) or None, timeout=120, what="the forked engine")
    assert waiting.poll() is None
    waiting.send_signal(signal.SIGTERM)  # what a worker sends a flow run it cancels or stops
    assert waiting.wait(timeout=60) == -signal.SIGTERM  # ended by the signal, as the engine was
    poll(lambda: not _forked(process) or None, timeout=30, what="the engine gone")

    killed = _command(path, str(uuid.uuid4()), silent_api)
    [engine] = poll(lambda: _forked(process) or None, timeout=60, what="a second forked engine")
    killed.kill()  # SIGKILL: nothing passes it on, the server sees the command's connection close
    killed.wait()
    poll(lambda: not _forked(process) or None, timeout=30, what=f"engine {engine} killed with its command")


def test_a_stopped_server_waits_for_its_flow_runs_and_new_ones_run_without_it(server, silent_api):
    """SIGTERM (or its worker's end): no new requests; the running engine keeps its command's answer."""
    process, path = server
    running = _command(path, str(uuid.uuid4()), silent_api)
    [engine] = poll(lambda: _forked(process) or None, timeout=120, what="the forked engine")
    process.terminate()
    poll(lambda: not path.exists() or None, timeout=30, what="the server no longer listening")
    assert process.poll() is None  # still there for the running engine
    alone = _command(path, "not-a-flow-run-id", stderr=subprocess.PIPE, text=True)
    _, err = alone.communicate(timeout=120)
    assert alone.returncode == 1 and "Invalid flow run id" in err  # Prefect's engine, run by the command itself
    os.kill(engine, signal.SIGKILL)
    assert running.wait(timeout=60) == -signal.SIGKILL  # told how its engine ended
    assert process.wait(timeout=30) == 0


def _template() -> int:
    """This process's simulated-tools template (kernelsweep.sim.template), started if it was not."""
    template_env()
    [pid] = [
        p for p in descendants(os.getpid()) if b"kernelsweep.sim.template" in Path(f"/proc/{p}/cmdline").read_bytes()
    ]
    return pid


def test_a_tool_forked_from_the_template_ends_as_it_would_alone_and_goes_with_its_timeout(tmp_path):
    """The simulated tools' command (prefork_client) is the tool to its caller: the same exit code,
    streams and working folder as `python -P -m` gives, the same end when the tool is killed, and a
    timeout that kills the command (its session, as run_tool does) takes the forked tool along."""
    template = _template()
    env = {**os.environ, **template_env()}
    for args in (["--version"], ["--no-such-flag"], ["view", "-s", "missing.ntff", "--output-format", "json"]):
        forked = forked_argv(env, sys.executable, "kernelsweep.sim.neuron_explorer", *args)
        alone = [sys.executable, "-P", "-m", "kernelsweep.sim.neuron_explorer", *args]
        ran = [
            subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
            for argv in (forked, alone)
        ]
        assert [(r.returncode, r.stdout, r.stderr) for r in ran[:1]] == [
            (r.returncode, r.stdout, r.stderr) for r in ran[1:]
        ]
    assert ran[0].returncode != 0 and ran[0].stderr  # the last one failed, and said why, both ways

    server = [
        "http.server",
        "0",
        "--bind",
        "127.0.0.1",
        "--directory",
        str(tmp_path),
    ]  # any module; this one serves forever
    hung = run_tool(forked_argv(env, sys.executable, *server), env=env, timeout_seconds=3)
    assert hung.timed_out and hung.returncode == -signal.SIGKILL
    poll(lambda: not descendants(template) or None, timeout=30, what="the forked server gone with its command")

    killed = subprocess.Popen(
        forked_argv(env, sys.executable, *server), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    [tool] = poll(lambda: descendants(template) or None, timeout=30, what="a forked server")
    os.kill(tool, signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL  # ended as its tool ended


def test_a_template_whose_starter_dies_while_it_imports_stops_on_its_own():
    """A template's starter is a sweep's process, which dies with its host; a host killed during the
    template's preload (numpy and the stand-ins, about a second) once left it reparented and serving for
    ever (found after a fleet test's silent host). It stops once it sees that its starter is gone."""
    starter = (
        "import os\n"
        "from kernelsweep.sim import template\n"
        "template.template_env()\n"
        "print(next(iter(template._templates.values())).pid, flush=True)\n"
        "os._exit(0)\n"  # at once, as a killed process does: no exit handler stops the template
    )
    done = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, timeout=60, check=True)
    orphan = int(done.stdout)
    try:
        poll(lambda: not alive(orphan) or None, timeout=60, what="the orphaned template to stop", every=0.2)
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to become another user")
def test_the_template_forks_nothing_for_another_user():
    """Its address is abstract (no file, so no folder's mode keeps others out): the kernel's word on
    who connected is what refuses them. The same request from this user gets a process."""
    address = template_env()[TEMPLATE_ENV]
    version = ["kernelsweep.sim.neuron_ls", "--version"]
    child = os.fork()
    if child == 0:
        code = 2
        try:
            os.setuid(65534)  # nobody
            code = 0 if fork_from_server(address, version, {}) is None else 1
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0  # refused
    started = fork_from_server(address, version, dict(os.environ))
    assert started is not None
    end = started[1].recv(8)
    assert len(end) == 8  # its wait status, once it ended


SERVE_AND_SHOW = """
import gc, json, os, sys
from kernelsweep.toolchain.prefork_server import become, listen, serve
address, owner = sys.argv[1], int(sys.argv[2])
request = serve(listen(address), address, ["decimal"], owner)
if request is not None:
    become(request)
    with open(os.environ["SHOW_TO"], "w") as out:
        json.dump([gc.isenabled(), gc.get_freeze_count(), "decimal" in sys.modules], out)
    os._exit(0)
"""


def test_a_forked_process_holds_the_servers_preload_frozen_with_the_collector_on(tmp_path):
    """The server imports its modules at the first request and freezes them (kernelsweep.toolchain.preload), so
    no collection in a forked process walks them."""
    address, shown = str(tmp_path / "socket"), tmp_path / "shown.json"
    server = subprocess.Popen([sys.executable, "-P", "-c", SERVE_AND_SHOW, address, str(os.getpid())])
    try:
        poll(lambda: Path(address).exists() or None, timeout=30, what="the server listening", every=0.05)
        started = fork_from_server(address, ["show"], {**os.environ, "SHOW_TO": str(shown)})
        assert started is not None
        assert len(started[1].recv(8)) == 8  # its wait status, once it ended
        started[1].close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    enabled, frozen, imported = json.loads(shown.read_text())
    assert enabled and imported and frozen > 5_000
