"""What the simulator was configured to sleep, one record per emulated tool latency, and the lower
bound on a sweep's wall time those configured values imply.

A stand-in that emulates a tool's duration (the compile inside a trace, `neuronx-cc compile`, a
capture) appends one JSON line to `<state dir>/latency.jsonl` before it sleeps: the tool, the point
it ran (`point_key`), the modelled seconds and the time scale; it sleeps modelled x scale. The sweep
never reads the file. A benchmark does, so its bound comes from what the simulator was told to
sleep, never from times the same run measured (those include start-up and CPU contention, and a
bound built from them rises with every delay it should expose).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LATENCY_FILE = "latency.jsonl"
COMPILE, CAPTURE = "compile", "capture"


@dataclass(frozen=True)
class Latency:
    tool: str  # COMPILE or CAPTURE
    point: str  # point_key of what ran
    modelled_seconds: float
    time_scale: float

    @property
    def slept_seconds(self) -> float:
        return self.modelled_seconds * self.time_scale


def point_key(kernel_ref: str, params: Mapping[str, int], dtype: str, platform: str, lnc: int) -> str:
    """One point, as both the simulator (from a traced IR) and a benchmark (from a `Point`) name it."""
    shape = ",".join(f"{axis}={params[axis]}" for axis in sorted(params))
    return f"{kernel_ref}[{shape}] {dtype} {platform} lnc{lnc}"


def ir_point_key(ir: Mapping) -> str:
    return point_key(ir["kernel_ref"], ir["params"], ir["dtype"], ir["platform"], ir["lnc"])


def emulate(state_dir: Path, tool: str, point: str, modelled_seconds: float, time_scale: float) -> None:
    """Record what is about to be slept, then sleep it. One short O_APPEND write per record, so
    concurrent stand-ins never interleave their lines."""
    state_dir.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"tool": tool, "point": point, "modelled_seconds": modelled_seconds, "time_scale": time_scale})
    fd = os.open(state_dir / LATENCY_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    time.sleep(modelled_seconds * time_scale)


def read_latencies(state_dir: Path) -> list[Latency]:
    try:
        lines = (state_dir / LATENCY_FILE).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [Latency(**json.loads(line)) for line in lines if line]


def lower_bound(compiles: Sequence[float], captures: Sequence[float], compile_slots: int, cores: int) -> float:
    """No schedule finishes sooner: every point compiles (on `compile_slots`) before it captures (on
    `cores`). The compiles take C/slots, and the last of them is followed by at least the shortest
    capture; the captures take P/cores, and the first of them waits for at least the shortest compile."""
    if not compiles and not captures:
        return 0.0
    c, p = sum(compiles), sum(captures)
    first_compile = min(compiles, default=0.0)
    last_capture = min(captures, default=0.0)
    return max(c / compile_slots + last_capture, first_compile + p / cores)
