"""The simulated tools' template: a prefork server (kernelsweep.toolchain.prefork_server) that holds
numpy, ml_dtypes and the stand-ins' modules, from which every simulated tool and every trace and
benchmark worker of a run under kernelsweep's own Python is forked.

Why: a stand-in's work for a small point is milliseconds, its start 50-250 ms of CPU (an interpreter,
kernelsweep's modules, numpy): the simulated tools cost more CPU than the rest of a zero-latency
sweep. The adapters still start a process per call, with the same argv after the command, and read
its exit code, streams and files: the command is `prefork_client.py MODULE`, which gets a forked copy
of this template with its own streams, folder and environment and ends as that copy ends; without a
template it execs `python -P -m MODULE` as before. Nothing the simulator models changes: the noise,
the faults, the latencies and the files are the tools' own, decided after the fork from the
environment each call sends.

One template serves a process (`template_env`): it is started at the first simulated toolchain and
stops within a second of its owner's end (it checks that its parent is still the starter its command
line names), after the tools it forked have ended. Its own output goes nowhere: a caller reading a
command's streams to their end must not wait for the template, which outlives the command.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import runpy
import secrets
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import NoReturn

from kernelsweep.toolchain.parent_death import signal_on_parent_death
from kernelsweep.toolchain.prefork_client import TEMPLATE_ENV
from kernelsweep.toolchain.prefork_server import become, listen, serve
from kernelsweep.toolchain.preload import import_and_freeze

# What the stand-ins and the workers import before their work, so each forked copy has it already.
PRELOAD = (
    "numpy",
    "ml_dtypes",
    "kernelsweep.sim.entry",
    "kernelsweep.sim.neuron_profile",
    "kernelsweep.sim.neuronx_cc",
    "kernelsweep.sim.neuron_ls",
    "kernelsweep.sim.capture",
    "kernelsweep.sim.views",
    "kernelsweep.sim.nrtpy",
    "kernelsweep.sim.tracer",
    "kernelsweep.toolchain.tracing.worker",
    "kernelsweep.toolchain.iteration_worker",
)
# A stand-in is a short, single-threaded process, and numpy's BLAS starts its thread pool at import:
# the template must hold no thread when it forks.
LEAN_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
STOP_WAIT_SECONDS = 5.0
_templates: dict[str, subprocess.Popen] = {}  # this process's, by address: at most one
_lock = threading.Lock()


def template_env() -> dict[str, str]:
    """{TEMPLATE_ENV: its address} for this process's template, started at the first call; {} off Linux
    (no abstract sockets, no parent-death signal to tie the forked tools to the template) or if it
    cannot start."""
    if sys.platform != "linux":
        return {}
    with _lock:
        if not _templates:
            # Abstract: a template killed outright leaves nothing behind; random: no one guesses it.
            address = f"@kernelsweep-template-{os.getpid()}-{secrets.token_hex(8)}"
            try:  # listening before the template runs: the first tools come before its start is through
                with listen(address) as listener:
                    template = subprocess.Popen(
                        [sys.executable, "-P", "-m", __name__, address, str(listener.fileno()), str(os.getpid())],
                        env={**os.environ, **LEAN_ENV},
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        pass_fds=[listener.fileno()],
                    )
            except OSError:
                return {}
            atexit.register(_stop, template)
            _templates[address] = template
        return {TEMPLATE_ENV: next(iter(_templates))}


def cpu_seconds() -> float:
    """The CPU this process's template and the tools it forked and reaped have used: a forked tool is
    the template's child, so the caller's own RUSAGE_CHILDREN never counts it (benchmarks add this)."""
    total = 0.0
    for template in _templates.values():
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{template.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    return total


def _stop(template: subprocess.Popen) -> None:
    """At this process's exit: the template stops listening, and ends once the tools it forked have
    (none, unless a tool outlives its run's exit; then it ends a second after, on its own)."""
    with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
        template.terminate()
        template.wait(STOP_WAIT_SECONDS)


def _run_forked(argv: list[str], server: int) -> NoReturn:
    """As `python -P -m MODULE ARGS` would run: the module as `__main__`, then this process's end
    without the template's exit handlers (they are the template's, not this tool's)."""
    signal_on_parent_death(signal.SIGKILL)  # a template killed outright takes its tools along
    if os.getppid() != server:
        os._exit(1)
    import numpy  # preloaded

    numpy.random.seed()  # a fork copies the template's generator, as random's
    module, *args = argv
    sys.argv = [module, *args]
    sys.modules.pop(module, None)  # preloaded for its imports; run afresh as `__main__`, as `-m` runs it
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:  # as the interpreter ends on one: None is 0, a message is printed and 1
        if isinstance(exc.code, int):
            code = exc.code
        elif exc.code is not None:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    """`python -P -m kernelsweep.sim.template ADDRESS FD OWNER`: serve on the socket FD, listening at
    ADDRESS, until the starting process (pid OWNER) ends."""
    address, fd, owner = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    server = os.getpid()
    import_and_freeze(PRELOAD)  # now, not at the first request: the run's set-up goes on meanwhile
    request = serve(socket.socket(fileno=fd), address, (), owner)
    if request is None:
        return
    become(request)
    _run_forked(request.argv, server)


if __name__ == "__main__":
    main()
