"""What a compile costs the host, a cap on it, and how many compiles a host can run at once.

Compile time and compiler memory regress across compiler versions (aws-neuron-sdk#1374) and a
runaway compile can exhaust a host. Current NKI compiles inside the tracing call, in the trace
worker (kernelsweep.toolchain.tracing.worker), so the worker measures its own cost around that
call and caps itself:

* cost: the worker's peak resident memory (`ru_maxrss` of itself and of any compiler process it
  waited for: the memory the host had to have) and the CPU seconds of the tracing-and-compiling
  call (its own and its children's user + system time);
* cap: `execution.compile_memory_limit_gb` becomes the worker's RLIMIT_AS before anything is
  imported; each process the compiler starts inherits it. An allocation past it fails inside the
  worker (a MemoryError, a `std::bad_alloc`), which becomes a `CompileOOM` row, never retried,
  while the host's other work keeps its memory. RLIMIT_AS counts address space, not resident
  memory, so it is off unless asked for: a healthy compile may reserve more than it touches;
* slots: the largest peak measured on this host per compiler version is kept in a small ledger
  (`CompilePeaks`, next to the NeuronCore leases); the default compile slots divide the host's
  memory by it (by COMPILE_MEMORY_BYTES until a compile has been measured).

The worker side (`usage`, `since`, `apply_limit`) runs under the Neuron SDK's interpreter: standard
library only, Python 3.10.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
from dataclasses import dataclass
from pathlib import Path

COMPILE_MEMORY_BYTES = 4 * 2**30  # a large NEFF compile can hold several GB: the guess until one is measured
PEAK_HEADROOM = 1.25  # slots leave this much room over the largest measured peak
LEDGER_FILE = "compile-peaks.json"
_KIB = 1024  # ru_maxrss is in KiB on Linux


@dataclass(frozen=True)
class CompileCost:
    """One compile's cost; None where it was not measured (a cache hit, a route that cannot)."""

    peak_rss_bytes: int | None
    cpu_seconds: float | None
    memory_limit_bytes: int | None = None  # the cap it ran under (None: uncapped)


@dataclass(frozen=True)
class Usage:
    peak_rss_bytes: int
    cpu_seconds: float


def usage() -> Usage:
    """This process's and its waited-for children's peak RSS and CPU so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return Usage(max(own.ru_maxrss, children.ru_maxrss) * _KIB, cpu)


def since(before: Usage, limit_bytes: int | None) -> CompileCost:
    """The cost of what ran after `before`: the peak (a high-water mark: the process's, which the
    compile's allocation set unless the process was bigger before it) and the CPU it used."""
    after = usage()
    return CompileCost(after.peak_rss_bytes, round(after.cpu_seconds - before.cpu_seconds, 6), limit_bytes)


def apply_limit(limit_bytes: int | None) -> None:
    """Cap this process's address space (and every process it starts) at `limit_bytes`."""
    if limit_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def oom_message(limit_bytes: int | None) -> str:
    """The one line a CompileOOM row carries."""
    if limit_bytes:
        cap = f"its cap of {limit_bytes / 2**30:.3g} GiB (execution.compile_memory_limit_gb)"
        return f"the compile ran out of memory under {cap}; raise the cap, shrink the shape or compile on a larger host"
    return "the compile ran out of memory; shrink the shape, compile on a larger host, or lower execution.compile_slots"


def default_slots(cores: int, host_memory_bytes: int, peak_bytes: int | None) -> int:
    """One compile per core, fewer when the measured peak (with headroom), or the guess, would not fit."""
    per_compile = peak_bytes * PEAK_HEADROOM if peak_bytes else COMPILE_MEMORY_BYTES
    return max(1, min(cores, int(host_memory_bytes // per_compile)))


class CompilePeaks:
    """The largest compile peak measured on this host, per compiler version: a JSON file updated
    under an exclusive lock, so concurrent compiles and flow runs on one host keep the maximum."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LEDGER_FILE

    def peak(self, compiler_version: str | None) -> int | None:
        value = self._read().get(compiler_version or "")
        return int(value) if isinstance(value, int) and value > 0 else None

    def record(self, compiler_version: str | None, peak_bytes: int | None) -> None:
        if not peak_bytes:
            return
        # private, as the core leases beside it want their folder (a compile host that also captures)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            peaks = _parsed(os.read(fd, 1 << 20))
            key = compiler_version or ""
            if peak_bytes > peaks.get(key, 0):
                peaks[key] = int(peak_bytes)
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                os.write(fd, json.dumps(peaks, sort_keys=True).encode())
        finally:
            os.close(fd)

    def _read(self) -> dict[str, int]:
        try:
            return _parsed(self.path.read_bytes())
        except OSError:
            return {}


def _parsed(raw: bytes) -> dict[str, int]:
    """A ledger another version wrote badly is treated as empty, never as a failure."""
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}
