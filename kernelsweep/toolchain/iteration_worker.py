"""The benchmark worker: one process that loads a NEFF and times N executions with the runtime's
Python API (kernelsweep.toolchain.iterations), under the interpreter that has it.

It imports the module the job names (`nrtpy`, or the simulator's stand-in), builds each input from
its raw file as the capture's input files hold it, and calls `NrtpyModel.benchmark(inputs,
warmup_iter=, benchmark_iter=, mode="device")`; the per-iteration `durations_ms` go to the job's
result file. Runs on Python 3.10+ with numpy (ml_dtypes for bfloat16) and the runtime only.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    import numpy as np

    from kernelsweep.dtypes import numpy_dtype

    runtime = importlib.import_module(job["module"])
    model = runtime.NrtpyModel.load_from_neff(job["neff"])
    inputs = {}
    for name, given in job["inputs"].items():
        array = np.fromfile(given["file"], dtype=numpy_dtype(given["dtype"])).reshape(given["shape"])
        inputs[name] = runtime.NrtpyTensor.from_numpy(array, name=name)
    stats = model.benchmark(inputs, warmup_iter=job["warmup"], benchmark_iter=job["iterations"], mode="device")
    answer = {"durations_ms": [float(ms) for ms in stats.durations_ms], "tool": getattr(runtime, "TOOL", job["module"])}
    Path(job["result"]).write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    from kernelsweep.toolchain.parent_death import arm

    arm()  # first: this tool dies with the run that started it (process.run_tool)
    sys.exit(main(sys.argv[1:]))
