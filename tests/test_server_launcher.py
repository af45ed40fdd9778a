"""The one server launcher (`kernelsweep.flows.server`) without starting a server: how it runs
processes, how it stops them, and that the Prefect interface it relies on is still there.

A real server is started by the slow tests that need one (`test_server_command.py`, the kill
test, `test_working_folder.py`); these check the launcher's parts in well under a second each.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest
from prefect_server import poll

from kernelsweep.flows import server


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """`pid` has exited (or is a zombie waiting for its parent) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_the_server_runs_as_prefects_public_command_with_the_working_folder_off_its_path():
    argv = server.server_argv("127.0.0.1", 4321, ui=False)
    assert argv[:6] == [sys.executable, "-P", "-m", "kernelsweep.flows.server_process", "server", "start"]
    assert argv[6:] == ["--host", "127.0.0.1", "--port", "4321", "--analytics-off", "--no-ui"]
    # one API process of a multi-server setup runs no services (the services process does)
    assert server.server_argv("127.0.0.1", 4321, services=False)[-1] == "--no-services"


def test_the_options_and_settings_the_launcher_uses_are_prefects_public_ones(monkeypatch):
    """A Prefect upgrade that renames a setting or an option fails here, not in a user's terminal."""
    import prefect.settings

    helped = subprocess.run(
        [sys.executable, "-P", "-m", server.SERVER_PROCESS, "server", "start", "--help"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert helped.returncode == 0, helped.stderr
    for option in ("--host", "--port", "--analytics-off", "--no-ui", "--ui", "--workers", "--no-services"):
        assert option in helped.stdout, option
    for name, value in server.TEMPORARY_SERVER_SETTINGS.items():
        assert hasattr(prefect.settings, name), name
        monkeypatch.setenv(name, value)
    services = prefect.settings.Settings().server.services
    assert not any(
        getattr(services, s).enabled
        for s in (
            "scheduler", "late_runs", "foreman", "repossessor", "pause_expirations", "cancellation_cleanup",
            "cleanup_reconciler",
        )
    )  # fmt: skip
    assert services.db_vacuum.enabled_vacuum_types == set()
    assert services.task_run_recorder.enabled and services.event_persister.enabled  # what records a run


def test_a_process_started_to_die_with_its_caller_dies_when_the_caller_is_killed(tmp_path):
    """The parent-death signal without a pre-exec hook: a caller (here a middle process) killed with
    SIGKILL takes the process with it, though that runs in a session of its own."""
    sleep = shutil.which("sleep")
    caller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from kernelsweep.flows.server import dying_with_caller\n"
            f"child = subprocess.Popen(dying_with_caller([{sleep!r}, '60']), start_new_session=True)\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert caller.stdout is not None
    child = int(caller.stdout.readline())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0] != sleep.encode():  # launcher exec'd
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert os.getsid(child) == child  # its own session: the caller's Ctrl-C does not reach it
    caller.kill()
    caller.wait(timeout=10)
    assert _gone(child), "the process outlived its caller"


def test_a_process_whose_caller_is_already_gone_never_starts(tmp_path):
    """The caller died between fork and the signal being armed: the launcher exits, nothing runs."""
    marker = tmp_path / "ran"
    argv = server.dying_with_caller([sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    argv[argv.index(str(os.getpid()))] = "1"  # a caller that is not its parent
    done = subprocess.run(argv, timeout=30)
    assert done.returncode == 1 and not marker.exists()


def test_terminate_tree_stops_a_process_and_what_it_started_in_other_sessions():
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    root = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert root.stdout is not None
    grandchild = int(root.stdout.readline())
    assert grandchild in server.descendants(root.pid)
    server.terminate_tree(root, grace_seconds=5)
    assert root.returncode == -signal.SIGTERM and _gone(grandchild)


def test_terminate_tree_kills_what_outlives_the_grace_after_the_process_itself_has_exited():
    """As a worker stopped while one of its flow runs hangs in its SIGTERM handler: the worker exits at
    once, its flow run is reparented away from it, and still ends, killed once the grace is over."""
    hang = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
    script = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {hang!r}], stdout=subprocess.PIPE, start_new_session=True)\n"
        "child.stdout.readline()\n"
        "print(child.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    root = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert root.stdout is not None
    hanging = int(root.stdout.readline())
    try:
        server.terminate_tree(root, grace_seconds=1)
        assert root.returncode == -signal.SIGTERM
        assert _gone(hanging, timeout=0.5), "a descendant that ignored SIGTERM was left running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hanging, signal.SIGKILL)


def test_terminate_tree_with_no_grace_kills_at_once():
    ignoring = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(9)"
    process = subprocess.Popen([sys.executable, "-c", ignoring], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline()
    started = time.monotonic()
    server.terminate_tree(process, grace_seconds=0)
    assert process.returncode == -signal.SIGKILL and time.monotonic() - started < 5


def test_a_server_that_exits_while_starting_is_reported_with_its_last_log_line(tmp_path):
    log = tmp_path / "server.log"
    with log.open("ab") as handle:
        process = subprocess.Popen(
            [sys.executable, "-c", "print('starting'); print('database is unreachable'); raise SystemExit(3)"],
            stdout=handle,
        )
    with pytest.raises(server.ServerStartError) as caught:
        server.wait_healthy(process, server.api_url("127.0.0.1", server.free_port()), log=log, timeout_seconds=60)
    assert "exited during start-up (exit 3): database is unreachable" in caught.value.message
    assert str(log) in caught.value.message and caught.value.returncode == 3


def test_the_reason_a_server_stopped_is_its_tracebacks_last_line_not_its_goodbye(tmp_path):
    log = tmp_path / "server.log"
    with log.open("ab") as handle:
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.tracebacklimit = 0; print('banner', flush=True); "
             "import atexit; atexit.register(print, 'Server stopped!'); open('/proc/nope/prefect.db')"],
            stdout=handle, stderr=subprocess.STDOUT,
        )  # fmt: skip
    with pytest.raises(server.ServerStartError) as caught:
        server.wait_healthy(process, server.api_url("127.0.0.1", server.free_port()), log=log, timeout_seconds=60)
    assert "FileNotFoundError: [Errno 2] No such file or directory: '/proc/nope/prefect.db'" in caught.value.message


@pytest.mark.parametrize("cli", ["prefect", "kernelsweep.flows.server_process"])  # a user's, and the launcher's
def test_a_prefect_server_is_told_from_another_program_by_its_command_line(cli):
    code = "import time; print(1, flush=True); time.sleep(60)"
    lookalike = subprocess.Popen([sys.executable, "-c", code, cli, "server", "start"], stdout=subprocess.PIPE)
    services_argv = [sys.executable, "-c", code, cli, "server", "services", "start"]
    services = subprocess.Popen(services_argv, stdout=subprocess.PIPE)
    try:
        assert lookalike.stdout is not None and lookalike.stdout.readline()  # exec'd: its own command line
        assert services.stdout is not None and services.stdout.readline()
        assert server.is_prefect_server(lookalike.pid)
        assert not server.is_prefect_server(services.pid)  # not an API server: `kernelsweep server stop` leaves it
        assert not server.is_prefect_server(os.getpid())
    finally:
        services.kill()
        services.communicate()
        lookalike.kill()
        lookalike.communicate()
    assert not server.is_prefect_server(lookalike.pid)  # gone


def test_a_port_in_use_is_not_free_and_a_picked_one_is():
    import socket

    port = server.free_port()
    assert server.port_free("127.0.0.1", port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not server.port_free("127.0.0.1", port)


@pytest.mark.parametrize(
    ("status", "busy", "calls_made"),
    [(503, 2, 3), (429, 5, 6), (503, 6, 6), (500, 1, 1)],
    ids=["locked-then-answers", "busy-five-times-then-answers", "gives-up-after-five-retries", "500-not-retried"],
)
def test_an_api_call_retries_what_prefects_client_retries_and_no_more(status, busy, calls_made, monkeypatch):
    """The slow tests and the server benchmark talk to servers whose own services lock SQLite now and
    then (they answer 503); `api_call` retries the statuses Prefect's client retries, with its pauses
    doubling, up to 5 times, and passes any other error straight through."""
    import http.server
    import threading

    pauses: list[float] = []
    monkeypatch.setattr(server.time, "sleep", pauses.append)
    calls: list[str] = []

    class Busy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            calls.append(self.path)
            code, body = (status, b"") if len(calls) <= busy else (200, b'{"state": {"type": "COMPLETED"}}')
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    refused: list[int] = []
    with http.server.HTTPServer(("127.0.0.1", 0), Busy) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_address[1]}/api"
        try:
            if calls_made > busy:
                assert server.api_call(url, "/flow_runs/f-1", refused=refused.append) == {
                    "state": {"type": "COMPLETED"}
                }
            else:
                with pytest.raises(urllib.error.HTTPError, match=str(status)):
                    server.api_call(url, "/flow_runs/f-1", refused=refused.append)
        finally:
            httpd.shutdown()
    assert calls == ["/api/flow_runs/f-1"] * calls_made
    retried = calls_made - 1 if status in server.RETRIED_STATUSES else 0
    assert refused == [status] * retried and pauses == [2**n for n in range(retried)]


def test_the_one_services_process_gets_its_own_settings(tmp_path, monkeypatch):
    """`prefect server services start` runs the event and log distributors with every other service;
    apart from the API processes no websocket client listens to them, so the launcher turns them off
    there and only there. Being the only services process, it keeps the triggers' causal ordering and
    its events' duplicate check in memory and reads the triggers' events in batches. The process gets
    the settings, except one the caller's environment sets (several services processes need Redis's
    ordering), and Prefect reads them as those switches, over a profile's Redis values."""
    import prefect.settings

    caller = {"PATH": os.environ["PATH"], "PREFECT_SERVER_EVENTS_CAUSAL_ORDERING": "prefect_redis.ordering"}
    process = server.launch_services(caller, tmp_path / "services.log")
    try:
        # Popen returns once the exec has begun; the kernel fills in the new environment a moment later.
        environ = poll(
            lambda: Path(f"/proc/{process.pid}/environ").read_bytes().decode().split("\0")[:-1],
            timeout=10,
            what="the services process's environment",
            every=0.01,
        )
        argv = Path(f"/proc/{process.pid}/cmdline").read_bytes().decode().split("\0")
    finally:
        server.terminate_tree(process)
    assert argv[1:7] == ["-P", "-m", server.SERVER_PROCESS, "server", "services", "start"]  # with the fix, as the API
    assert {f"{name}={value}" for name, value in (server.SERVICES_PROCESS_SETTINGS | caller).items()} <= set(environ)
    assert prefect.settings.Settings().server.events.stream_out_enabled  # a server's own process keeps them
    # A profile set up by Prefect's self-hosting guide (`prefect config set`) holds the Redis values;
    # the services process's environment wins over it.
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        'active = "redis"\n[profiles.redis]\n'
        'PREFECT_SERVER_EVENTS_CAUSAL_ORDERING = "prefect_redis.ordering"\n'
        'PREFECT_MESSAGING_CACHE = "prefect_redis.messaging"\n'
    )
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(profiles))
    assert prefect.settings.Settings().server.events.causal_ordering == "prefect_redis.ordering"
    for name, value in server.SERVICES_PROCESS_SETTINGS.items():
        monkeypatch.setenv(name, value)
    settings = prefect.settings.Settings().server
    assert not settings.events.stream_out_enabled and not settings.logs.stream_out_enabled
    assert settings.events.causal_ordering == "prefect.server.events.ordering.memory"
    assert settings.events.messaging_cache == "prefect.server.utilities.messaging.memory"
    assert settings.services.triggers.read_batch_size == 100
