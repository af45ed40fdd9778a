"""Points a re-check on a new SDK measures against a full re-sweep (issue 36), through the commands a
user runs: `kernelsweep run` of an exhaustive grid on the simulated compiler 2.21, `kernelsweep report
--export-best` (the tuned store), then with the simulated compiler bumped to 2.22
(kernelsweep/sim/sdk_tuning.py moves the best of M=512,K=1024,N=2048) `kernelsweep tuned recheck` of a
spec searching the same space, and last the full re-sweep it is weighed against. Counts, not times.

    python benchmarks/tuned_recheck.py [--tile-k 64,128] [--tile-m 128] [--budget 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import tomli_w

from kernelsweep.results import reader

SHAPES = (
    {"M": [512], "K": [1024], "N": [2048]},
    {"M": [2048], "K": [1024], "N": [2048]},
    {"M": [1024], "K": [1024], "N": [1024]},
)
OLD, NEW = "2.21.33363.0", "2.22.41000.0"


def spec(folder: Path, name: str, tunables: dict, search: dict | None) -> Path:
    blocks = [{"kernel": "matmul", "dtypes": ["bfloat16"], "grid": g, "tunables": tunables} for g in SHAPES]
    body = {
        "name": name,
        "platforms": ["trn2"],
        "toolchain": "sim",
        "results": str(folder / "results"),
        "artifacts": str(folder / "artifacts"),
        "capture": {"num_exec": 2},
        "kernels": [b | ({"search": search} if search else {}) for b in blocks],
    }
    path = folder / f"{name}.toml"
    path.write_text(tomli_w.dumps(body))
    return path


def kernelsweep(*args: str, compiler: str) -> str:
    env = {**os.environ, "KERNELSWEEP_SIM_COMPILER_VERSION": compiler}
    done = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", *args], env=env, capture_output=True, text=True
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"kernelsweep {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tile-k", default="64,128", help="tile_k values")
    parser.add_argument(
        "--tile-m", default="128", help="tile_m values (a shape's grid: 2 loop orders x these x tile_k)"
    )
    parser.add_argument("--budget", type=int, default=4, help="a re-tune's search budget")
    args = parser.parse_args()
    tunables = {"tile_m": [int(v) for v in args.tile_m.split(",")], "tile_n": [512]}
    tunables["tile_k"] = [int(v) for v in args.tile_k.split(",")]
    tunables["loop_order"] = ["mn", "nm"]
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        kernelsweep("run", str(spec(folder, "grid", tunables, None)), compiler=OLD)
        kernelsweep(
            "report", "--results", str(folder / "results"), "--export-best", str(folder / "b.json"), compiler=OLD
        )
        said = kernelsweep(
            "tuned", "recheck", str(spec(folder, "nightly", tunables, {"budget": args.budget})), compiler=NEW
        )
        kernelsweep("run", str(spec(folder, "resweep", tunables, None)), compiler=NEW)
        counts = Counter(r["sweep"] for r in reader.read(str(folder / "results")).to_pylist())
    print(said.strip())
    rechecked = sum(n for sweep, n in counts.items() if sweep.startswith("nightly"))
    print(f"points per sweep: {dict(counts)}")
    print(
        f"re-check on {NEW}: {rechecked} points measured; full re-sweep: {counts['resweep']} points "
        f"({len(SHAPES)} keys x {counts['resweep'] // len(SHAPES)} configurations)"
    )


if __name__ == "__main__":
    main()
