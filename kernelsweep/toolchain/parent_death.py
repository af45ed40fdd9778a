"""A tool dies with the run that started it, even a run killed outright (SIGKILL, OOM): Linux's
parent-death signal, armed inside the tool's own process.

A foreign tool (the real compiler, profiler, ...) cannot arm it, so `process.run_tool` starts it
through a launcher interpreter that arms it and execs the tool. kernelsweep's own entry points arm
it themselves, first thing, and start as one interpreter instead of two: the simulator's tools
(`python -P -m kernelsweep...`, each calls `arm()` before its main) and the trace and benchmark
workers (`python -c` code from `bootstrap`). run_tool tells them the run's pid in PARENT_ENV; the
same check as the launcher's then catches a run that died before the signal was armed.

Imported by the trace worker: Python 3.10 and the standard library only.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

# PARENT_ENV: the pid of the run that started a tool without the launcher (defined with the forked
# tools' command, which must read it before it can import anything of kernelsweep's)
from kernelsweep.toolchain.prefork_client import PARENT_ENV, entry_point, forked

GO = "go\n"  # what a tool run_tool started early reads on its stdin once it holds a slot (process.Slots)
PR_SET_PDEATHSIG = 1
_ARMED = "import sys; sys.path.insert(0, sys.argv.pop(1)); from kernelsweep.toolchain.parent_death import arm; arm(); "


def arm() -> None:
    """SIGKILL this process when the thread that started it ends; exit now if the run is already gone.
    Nothing to do outside Linux, or in a process run_tool did not start without its launcher."""
    parent = os.environ.pop(PARENT_ENV, None)  # popped: whatever this tool starts is not told it
    if parent is None or sys.platform != "linux":
        return
    signal_on_parent_death(signal.SIGKILL)
    if os.getppid() != int(parent):
        sys.exit(1)  # the run died before the signal was armed: this process was handed to another


def signal_on_parent_death(number: int) -> None:
    """Have Linux send this process `number` when the thread that started it ends (elsewhere: nothing)."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, number)


def bootstrap(module: str) -> str:
    """`python -c` code for a worker under another interpreter: argv[1] (a folder holding only the
    link to kernelsweep's package) goes first on the path, the signal is armed, then `module`'s
    `main(argv[2:])` runs (`-c`, not `-m`: `-P` needs Python 3.11)."""
    return f"{_ARMED}from {module} import main; sys.exit(main(sys.argv[1:]))"


def arms_itself(argv: Sequence[str]) -> bool:
    """Whether argv arms the signal itself: a forked tool's command, a kernelsweep module under
    `python -P -m`, or a worker's `bootstrap` code."""
    entry = entry_point(argv)
    if entry is not None:
        return forked(argv) or entry[0].startswith("kernelsweep.")
    return list(argv[1:2]) == ["-c"] and len(argv) > 2 and argv[2].startswith(_ARMED)
