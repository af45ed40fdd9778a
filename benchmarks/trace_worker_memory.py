"""What the trace workers hold in memory while a sweep runs, the ones started early and waiting for a
compile slot included (`kernelsweep.toolchain.process.Slots`: at most one waiting per slot).

    python benchmarks/trace_worker_memory.py [SPEC]

Runs `kernelsweep run SPEC` (the README's quickstart by default) on the simulated toolchain at the
seeds' latencies (time scale 1), in a temporary folder with its own Prefect home, samples every trace
worker's resident memory (`VmRSS`) from /proc every 50 ms, and prints each worker's largest sample,
the most workers alive at once and the most memory they held together. On the simulator the worker
imports only the stand-in tracer; a real Neuron SDK's imports are larger and are not measured here.
Linux only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelsweep.sim.config import sim_env
from kernelsweep.toolchain.tracing import JOB_FILE

REPO = Path(__file__).resolve().parent.parent


def workers_rss_mb() -> dict[str, float]:
    """Every live trace worker's resident memory, by pid (a worker's argv names its job file)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if JOB_FILE not in Path(f"/proc/{pid}/cmdline").read_text():
                continue
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue
        rss = [line.split()[1] for line in status if line.startswith("VmRSS:")]
        if rss:
            found[pid] = int(rss[0]) / 1024
    return found


def main() -> int:
    spec = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "examples/quickstart.toml").resolve()
    with tempfile.TemporaryDirectory(prefix="trace-memory-") as folder:
        env = {**os.environ, **sim_env(time_scale=1.0), "PREFECT_HOME": str(Path(folder) / "prefect")}
        argv = [str(Path(sys.executable).parent / "kernelsweep"), "run", str(spec), "--toolchain", "sim"]
        run = subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        largest: dict[str, float] = {}
        most_alive, most_held = 0, 0.0
        while run.poll() is None:
            now = workers_rss_mb()
            for pid, mb in now.items():
                largest[pid] = max(mb, largest.get(pid, 0.0))
            most_alive, most_held = max(most_alive, len(now)), max(most_held, sum(now.values()))
            time.sleep(0.05)
        if run.returncode != 0:
            print(f"kernelsweep run exited {run.returncode}: {run.stderr.strip()[-500:]}", file=sys.stderr)
            return 1
    sizes = sorted(largest.values())
    print(f"{spec.name}: {len(sizes)} trace workers seen")
    middle = sizes[len(sizes) // 2]
    print(f"  largest VmRSS per worker: min {sizes[0]:.0f} MB, median {middle:.0f} MB, max {sizes[-1]:.0f} MB")
    print(f"  most alive at once: {most_alive} (working and waiting), holding {most_held:.0f} MB together")
    return 0


if __name__ == "__main__":
    sys.exit(main())
