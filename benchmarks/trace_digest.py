"""What the simulated NKI tracer makes of the built-in kernels, as one digest: the check that a change
to how the simulated `nki.language` / `nki.isa` run (kernelsweep.sim.nki) left every trace alone.

    python benchmarks/trace_digest.py [--every N]    # N > 1 takes every Nth point of each grid, for a quick look

Every point of three grids (the matmul and the MLP over all their tunables, the vector add over its
shapes), on trn2, trn1 and inf2, traced on every NKI generation the simulator knows: the payload the
simulated tracer hands the compiler (work counts, per-line program, warnings), or the error it
raises, in the tracer's words. The temporary folder each point is bound in is taken out, so two runs
of the same code print the same digest. Prints the number of traces, the digest and the CPU seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

from kernelsweep.kernels import load_kernel
from kernelsweep.kernels.matmul import matmul as MATMUL
from kernelsweep.kernels.mlp import mlp as MLP
from kernelsweep.sim.nki.generations import GENERATIONS
from kernelsweep.sim.tracer import bound, payload
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain.tracing.request import TraceRequest

BLOCKS = (
    {"kernel": "matmul", "dtypes": ["bfloat16", "float32"], "grid": {"M": [256, 512], "K": [512], "N": [1024]},
     "tunables": {name: list(values) for name, values in MATMUL.tunables.items()}},
    {"kernel": "mlp", "dtypes": ["bfloat16"], "grid": {"b": [1], "s": [128, 256], "h": [1024], "i": [512]},
     "tunables": {name: list(values) for name, values in MLP.tunables.items()}},
    {"kernel": "vector_add", "dtypes": ["float32", "bfloat16"], "grid": {"n": [2048, 4096], "free_size": [1, 16]}},
)  # fmt: skip


def points(block: dict) -> list[Point]:
    spec = parse_spec({"name": "digest", "platforms": ["trn2", "trn1", "inf2"], "toolchain": "sim", "kernels": [block]})
    return expand_spec(spec).points


def traced(point: Point, generation_name: str) -> str:
    """The payload as JSON, or the error's type and words; the point's temporary folder taken out."""
    request = TraceRequest.for_point(point, load_kernel(point.kernel_ref), point.platform)
    with tempfile.TemporaryDirectory() as folder:
        try:
            found = payload(request, GENERATIONS[generation_name], "digest", bound(request, Path(folder)))
            text = json.dumps(found, sort_keys=True, default=str)
        except Exception as exc:  # noqa: BLE001 - a refusal is part of what is digested
            text = f"{type(exc).__name__}: {exc}"
        return text.replace(folder, "TMP")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=1, help="take every Nth point of each grid")
    args = parser.parse_args()
    digest, count, started = hashlib.sha256(), 0, time.process_time()
    for block in BLOCKS:
        for point in points(block)[:: args.every]:
            for name in GENERATIONS:
                digest.update(traced(point, name).encode())
                count += 1
    print(f"{count} traces, digest {digest.hexdigest()}, {time.process_time() - started:.1f} CPU-s")


if __name__ == "__main__":
    main()
