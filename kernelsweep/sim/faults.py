"""Configured faults for the simulated tools, so failure handling is tested end to end.

`KERNELSWEEP_SIM_FAULTS` is a comma-separated list of `name=value`:

    capture-busy=N        the first N captures in this state dir fail with the NRT busy error
    capture-timeout=N     the first N captures hang until the caller's timeout kills them
    compile-error=KERNEL  every compile of KERNEL (a kernel name, e.g. mlp) fails with an NCC
                          diagnostic; repeat the entry for several kernels
    compile-error-lnc2=KERNEL  every compile of KERNEL at LNC=2 fails with NCC_IXLV002, as public
                          reports show compiles failing only at LNC=2 (aws-neuron-sdk#1298); repeatable
    dge-timeout=N         the first N captures run with --enable-dge-notifs fail with NRT_TIMEOUT,
                          as Explorer warns the flag can for large NEFFs (troubleshooting.rst:229-233)
    zeros=KERNEL          every capture of KERNEL runs but writes all-zero outputs, as kernels that
                          silently return zeros after an SDK update do (nki-samples#134); repeatable
    alloc-fallback=KERNEL every compile of KERNEL succeeds after NKI's allocator fell back to
                          neuronx-cc's (NKI 0.7 CompileConfig.nki_alloc_fallback, on by default); repeatable

Counts are kept in the simulator's state dir under an exclusive lock, so they hold across the
separate processes a sweep runs the tools in, and each test's own state dir starts from zero.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

FAULTS_ENV = "KERNELSWEEP_SIM_FAULTS"
_COUNTED = ("capture-busy", "capture-timeout", "dge-timeout")
_BY_KERNEL = ("compile-error", "zeros", "compile-error-lnc2", "alloc-fallback")
_KNOWN = (*_COUNTED, *_BY_KERNEL)


@dataclass(frozen=True)
class Faults:
    capture_busy: int = 0
    capture_timeout: int = 0
    compile_errors: frozenset[str] = frozenset()
    zero_outputs: frozenset[str] = frozenset()
    dge_timeout: int = 0
    lnc2_compile_errors: frozenset[str] = frozenset()
    alloc_fallbacks: frozenset[str] = frozenset()


def parse_faults(text: str) -> Faults:
    counts = dict.fromkeys(_COUNTED, 0)
    kernels: dict[str, set[str]] = {name: set() for name in _BY_KERNEL}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = entry.partition("=")
        name, value = name.strip(), value.strip()
        if name not in _KNOWN or not sep or not value:
            raise ValueError(f"{FAULTS_ENV}: bad entry {entry!r}; use name=value with name one of {', '.join(_KNOWN)}")
        if name in kernels:
            kernels[name].add(value)
        elif not value.isdigit():
            raise ValueError(f"{FAULTS_ENV}: {name} takes a count, got {value!r}")
        else:
            counts[name] = int(value)
    return Faults(
        counts["capture-busy"],
        counts["capture-timeout"],
        frozenset(kernels["compile-error"]),
        frozenset(kernels["zeros"]),
        counts["dge-timeout"],
        frozenset(kernels["compile-error-lnc2"]),
        frozenset(kernels["alloc-fallback"]),
    )


def take(state_dir: Path, fault: str, limit: int) -> bool:
    """True for the first `limit` calls for `fault` in this state dir, counted across processes."""
    if limit <= 0:
        return False
    folder = state_dir / "faults"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{fault}.count", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        used = int(os.read(fd, 32) or b"0")
        if used >= limit:
            return False
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(used + 1).encode())
        return True
    finally:
        os.close(fd)  # closing drops the lock
