"""Peak memory of `read_profile` on a ~1 GB full-JSON profile.

A real `--output-format json` profile is ~1 GB per 250k instructions, and `summary` may come
after the instruction table. This writes such a file (summary last, so the whole file must be
streamed), extracts it in a child process and checks the child's peak RSS stays flat, i.e. far
below the file size. Not a unit test: it takes a minute and a gigabyte of disk.

    python benchmarks/extract_memory.py [--size-mb 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_PEAK_RSS_MB = 200
ROWS_PER_CHUNK = 10_000
TOTAL_TIME_S = 4.5256596e-05  # seed 000's kernel, so the extracted value is recognisable

INSTRUCTION_ROW = (
    '{"timestamp": %d, "duration": %d, "label": "mm_%d", "opcode": "MATMUL", '
    '"operands": "psum[0:128] <- sb[0:128], sb[128:256]", "hlo_name": "nki_mlp", '
    '"nki_source_location": "mlp_kernel.py:%d"}'
)

CHILD = """
import json, sys, time
from kernelsweep.profiles.metrics import read_profile
start = time.perf_counter()
metrics = read_profile(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - start,
                  "total_time_us": metrics.values["total_time_us"]}))
"""


def write_profile(path: Path, size_bytes: int) -> int:
    """Write instructions chunk by chunk up to size_bytes, then the summary; return row count."""
    summary = {"total_time": TOTAL_TIME_S, "hardware_flops": 427819008}
    rows = 0
    with open(path, "w") as out:
        out.write('{"instruction": [')
        while out.tell() < size_bytes:
            chunk = ",\n".join(
                INSTRUCTION_ROW % (1000 + 37 * i, 37 + i % 50, i, 30 + i % 200)
                for i in range(rows, rows + ROWS_PER_CHUNK)
            )
            out.write((",\n" if rows else "") + chunk)
            rows += ROWS_PER_CHUNK
        out.write(f'],\n"dma": [],\n"summary": [{json.dumps(summary)}]}}\n')
    return rows


def extract_in_child(path: Path) -> tuple[dict, float, float]:
    """Run read_profile in a fresh interpreter; return its report, wall seconds, peak RSS MB."""
    paths = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    start = time.perf_counter()
    argv = [sys.executable, "-c", CHILD, str(path)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    return json.loads(done.stdout), wall, peak_mb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="profile size to generate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kernelsweep-extract-") as tmp:
        path = Path(tmp) / "profile.json"
        start = time.perf_counter()
        rows = write_profile(path, args.size_mb * 1024 * 1024)
        print(
            f"wrote {path.stat().st_size / 2**20:.0f} MiB, {rows:,} instructions, "
            f"summary last, in {time.perf_counter() - start:.1f} s"
        )
        report, wall, peak_mb = extract_in_child(path)
    print(f"extraction: {report['seconds']:.1f} s in read_profile, {wall:.1f} s child wall time")
    print(f"child peak RSS: {peak_mb:.1f} MiB (bound {MAX_PEAK_RSS_MB} MiB)")
    assert abs(report["total_time_us"] - TOTAL_TIME_S * 1e6) < 1e-6, report
    assert peak_mb < MAX_PEAK_RSS_MB, f"peak RSS {peak_mb:.1f} MiB over {MAX_PEAK_RSS_MB} MiB"
    return 0


if __name__ == "__main__":
    sys.exit(main())
