"""kernelsweep's own cost of one cached `kernelsweep bench --json` call on the simulator.

    python benchmarks/bench_overhead.py              # matmul M=256,K=512,N=512, 1 warm-up + 5 timed calls
    python benchmarks/bench_overhead.py --calls 10 --iterations 200

An autotuner calls `bench` once per candidate, so what matters is the time kernelsweep adds around
the tools. Each call is a fresh `kernelsweep bench` process (as an agent loop would start it) against
one artifact store: the first call traces and compiles, the timed ones find the IR and NEFF in the
store's caches and still generate inputs, capture and extract. Overhead = the call's wall time minus
`tool_seconds` (the wall time of the tool processes it ran, which the object reports; on a real host
those are neuron-profile and the runtime). Target: <= 2 s. Wall times mean little on a busy host, so
the load average is printed beside them, with the call's CPU seconds (its own and its children's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TARGET_SECONDS = 2.0
# The console script, plus the CPU its own process spent (imports, stages, not its tools) at exit.
_WRAPPER = """import atexit, os, resource, sys
def _own_cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["BENCH_OWN_CPU_FILE"], "w") as f:
        f.write(str(u.ru_utime + u.ru_stime))
atexit.register(_own_cpu)
from kernelsweep.flows.cli import main
main(sys.argv[1:])
"""


@dataclass(frozen=True)
class Call:
    wall: float  # s, the whole process
    tools: float  # s, wall time of the tool processes it ran (the object's tool_seconds)
    own_cpu: float  # s, CPU of the kernelsweep process itself
    found: dict  # the printed object

    @property
    def overhead(self) -> float:
        return self.wall - self.tools

    def line(self) -> str:
        return (
            f"wall {self.wall:.2f} s, tools {self.tools:.2f} s, overhead {self.overhead:.2f} s "
            f"(kernelsweep's own CPU {self.own_cpu:.2f} s)"
        )


def one_call(folder: Path, args: list[str]) -> Call:
    """One `kernelsweep bench` process, as an agent loop would start it."""
    cpu_file = folder / "own-cpu"
    env = {**os.environ, "KERNELSWEEP_STATE_DIR": str(folder / "state"), "BENCH_OWN_CPU_FILE": str(cpu_file)}
    command = [sys.executable, "-c", _WRAPPER, "bench", *args, "--toolchain", "sim", "--json"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    found = json.loads(done.stdout)
    return Call(wall, found["tool_seconds"], float(cpu_file.read_text()), found)


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", default="matmul")
    parser.add_argument("--shape", default="M=256,K=512,N=512")
    parser.add_argument("--iterations", type=int, default=0)
    parser.add_argument("--calls", type=int, default=5, help="timed (cached) calls")
    options = parser.parse_args()
    args = [options.kernel, "--shape", options.shape, "--iterations", str(options.iterations)]
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp:
        folder = Path(tmp)
        print(f"before: {load()}")
        print(f"first call (traces, compiles): {one_call(folder, args).line()}")
        calls = []
        for number in range(options.calls):
            call = one_call(folder, args)
            if not (call.found["trace"]["cache_hit"] and call.found["compile"]["cache_hit"]):
                sys.exit("a timed call missed the trace or compile cache: the figure would not be a cached call's")
            calls.append(call)
            print(f"cached call {number + 1}: {call.line()}; {load()}")
        overheads = [c.overhead for c in calls]
        median = statistics.median(overheads)
        verdict = "within" if median <= TARGET_SECONDS else "OVER"
        print(
            f"kernelsweep overhead of a cached bench call: median {median:.2f} s (min {min(overheads):.2f}, "
            f"max {max(overheads):.2f}; own CPU median {statistics.median(c.own_cpu for c in calls):.2f} s), "
            f"{verdict} the {TARGET_SECONDS:.0f} s target; after: {load()}"
        )


if __name__ == "__main__":
    main()
