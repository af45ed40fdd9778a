"""What a model's code pays to read one tuned configuration: `from kernelsweep.tuned import best` and
one `best(...)` on an exported file, in a fresh interpreter each time (nothing imported before), and
which heavy modules that loaded. The target, 50 ms, is issue 36's; the figures are the median over
`--runs` processes of wall and CPU time from just before the import to just after the lookup.

    python benchmarks/tuned_lookup.py [--runs 10] [--entries 1000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelsweep.tuned.export import write
from kernelsweep.tuned.keys import FORMAT_VERSION

TARGET_MS = 50.0
HEAVY = ("prefect", "pyarrow", "numpy", "optuna", "boto3", "pandas", "scipy")
PROBE = """
import sys, time
wall, cpu = time.perf_counter(), time.process_time()
from kernelsweep.tuned import best
found = best("matmul", "M=3000,K=1024,N=2048", dtype="bfloat16", platform="trn2", source=sys.argv[1])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
heavy = [m for m in {heavy!r} if m in sys.modules]
print(wall * 1e3, cpu * 1e3, found.match, ",".join(heavy) or "-")
"""


def entries(count: int) -> list[dict]:
    """`count` stored bests of the matmul over a grid of shapes (what a large library would ship)."""
    sizes = [128 * 2**i for i in range(12)]
    out = []
    for i in range(count):
        m, n = sizes[i % len(sizes)], sizes[(i // len(sizes)) % len(sizes)]
        key = {"kernel": "matmul", "shape": f"M={m},K=1024,N={n}", "dtype": "bfloat16", "platform": "trn2"}
        key |= {"lnc": 2, "sdk": {"compiler": f"2.{20 + i // 144}.0", "runtime": "r", "nki": "0.6"}}
        best = {"tunables": {"tile_m": 128, "tile_n": 512}, "latency_median_us": 100.0, "row_id": f"run/{i}"}
        confirmed = {"at": "2026-11-01T00:00:00+00:00", "host": "h", "by": "search", "flow_run_id": "run"}
        out.append({"format_version": FORMAT_VERSION, "key": key, "best": best, "confirmed": confirmed})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--entries", type=int, default=1000)
    args = parser.parse_args()
    from kernelsweep.tuned.keys import seal

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tuned.json"
        write([seal(e) for e in entries(args.entries)], "benchmark", path)
        code = PROBE.format(heavy=HEAVY)
        runs = [
            subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
            for _ in range(args.runs)
        ]
    walls = [float(r.split()[0]) for r in runs]
    cpus = [float(r.split()[1]) for r in runs]
    matches = {" ".join(r.split()[2:-1]) for r in runs}
    heavy = {r.split()[-1] for r in runs}
    print(f"{args.entries} entries ({path.name}), {args.runs} fresh interpreters: lookup answered {matches}")
    print(f"import + lookup: median wall {statistics.median(walls):.1f} ms (max {max(walls):.1f}), "
          f"median CPU {statistics.median(cpus):.1f} ms; target {TARGET_MS:.0f} ms")  # fmt: skip
    print(f"heavy modules loaded: {heavy}")


if __name__ == "__main__":
    main()
