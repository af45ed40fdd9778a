"""cProfile in every Prefect server process the replay benchmark starts, to see where a point's CPU
goes (docs/fleet.md, "Sizing past this machine"). Python imports this module at start-up when its
folder is on PYTHONPATH; it does nothing unless KERNELSWEEP_PROFILE_DIR names a folder. Both paths
absolute (a server runs in `/`):

    python benchmarks/server_replay.py run --hosts 100 --setups postgres \\
        --set PYTHONPATH=$PWD/benchmarks/server_profile --set KERNELSWEEP_PROFILE_DIR=/tmp/profiles

Each process writes `<pid>.prof` (pstats) when it exits, or `<pid>-term.prof` at SIGTERM (how the
benchmark stops a server; a services process would otherwise die without writing it).
"""

import atexit
import cProfile
import os
import signal

FOLDER = os.environ.get("KERNELSWEEP_PROFILE_DIR")

if FOLDER:
    _profile = cProfile.Profile()
    _profile.enable()

    def _write(suffix: str = "") -> None:
        _profile.disable()
        _profile.dump_stats(os.path.join(FOLDER, f"{os.getpid()}{suffix}.prof"))

    def _write_and_die(signum: int, frame: object) -> None:
        _write("-term")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    atexit.register(_write)
    signal.signal(signal.SIGTERM, _write_and_die)
