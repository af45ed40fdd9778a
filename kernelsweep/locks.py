"""Host-local, crash-safe, LNC-aware exclusive leases on NeuronCores.

The Neuron runtime reserves every visible NeuronCore for its process, so two captures on one core
fail or skew each other's numbers. Each PHYSICAL core gets a lock file ``<lock_dir>/nc<p>.lock``
held with ``fcntl.flock``: the kernel drops the lock when the holder closes the fd or dies, so a
crashed capture never leaves a stale lock and there is nothing to clean up. flock conflicts between
separately opened fds even inside one process, so the same mechanism serialises threads too.
Locking physical (not logical) cores keeps leasers with different LNC settings consistent.
Lock files are never deleted: unlinking a locked file would let the next opener lock a new inode.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import DeviceBusyError

log = logging.getLogger(__name__)

_BACKOFF_START_S = 0.005
_BACKOFF_CAP_S = 0.5
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")

# fds that hold (or are about to hold) a lock. A fork()ed child shares their open file
# descriptions, which would keep the cores locked until the child exits; the child closes its
# copies (plain close, never LOCK_UN, which would unlock the parent too).
_LIVE_FDS: set[int] = set()


def _close_inherited_fds() -> None:
    for fd in list(_LIVE_FDS):
        with suppress(OSError):
            os.close(fd)
    _LIVE_FDS.clear()


os.register_at_fork(after_in_child=_close_inherited_fds)


def _close(fd: int) -> None:
    _LIVE_FDS.discard(fd)
    os.close(fd)  # closing the only fd of the open file description drops the flock


def parse_visible_cores(value: str) -> list[int]:
    """Parse ``NEURON_RT_VISIBLE_CORES`` syntax (``0``, ``0-2``, ``0,1``, ``0-1,4``), ascending."""
    cores: list[int] = []
    for part in value.split(","):
        m = _RANGE.fullmatch(part.strip())
        if m is None:
            raise ValueError(f"bad NeuronCore list {value!r}: {part!r} is not N or N-M")
        lo, hi = int(m[1]), int(m[2] if m[2] is not None else m[1])
        if hi < lo:
            raise ValueError(f"bad NeuronCore list {value!r}: range {part.strip()!r} is descending")
        cores.extend(range(lo, hi + 1))
    if len(set(cores)) != len(cores):
        raise ValueError(f"bad NeuronCore list {value!r}: a core is listed twice")
    return sorted(cores)


@dataclass(frozen=True)
class CoreLease:
    logical_core: int
    physical_cores: tuple[int, ...]

    @property
    def visible_cores(self) -> str:
        """Value for ``NEURON_RT_VISIBLE_CORES``: the runtime takes LOGICAL ids and maps them."""
        return str(self.logical_core)


class _Held:
    """A lease plus the fds whose flocks make it exclusive; ``release()`` closes them."""

    def __init__(self, lease: CoreLease, fds: list[int]) -> None:
        self.lease, self._fds, self._pid = lease, fds, os.getpid()

    def release(self) -> None:
        # In a forked child the fd numbers were already closed and may have been reused.
        fds, self._fds = self._fds, []
        if os.getpid() == self._pid:
            for fd in reversed(fds):
                _close(fd)


class CoreLeaser:
    """Hands out exclusive leases on ``logical_cores``; one logical core = ``lnc`` physical."""

    def __init__(self, lock_dir: str | os.PathLike, logical_cores: Sequence[int], lnc: int = 1) -> None:
        if lnc < 1:
            raise ValueError(f"lnc must be >= 1, got {lnc}")
        cores = list(logical_cores)
        if not cores or min(cores) < 0 or len(set(cores)) != len(cores):
            raise ValueError(f"logical_cores must be distinct non-negative ids, got {cores}")
        self.lock_dir, self.logical_cores, self.lnc = Path(lock_dir), cores, lnc
        self.lock_dir.mkdir(parents=True, exist_ok=True)

    def physical_cores(self, logical: int) -> tuple[int, ...]:
        return tuple(range(logical * self.lnc, (logical + 1) * self.lnc))

    def try_acquire(self, label: str = "") -> _Held | None:
        """Lock the first free logical core without blocking, or return None."""
        for logical in self.logical_cores:
            held = self._try_logical(logical, label)
            if held is not None:
                return held
        return None

    def _try_logical(self, logical: int, label: str) -> _Held | None:
        # All physical cores or none, ascending and never waiting while holding: no deadlock.
        physical, fds = self.physical_cores(logical), []
        try:
            for p in physical:
                path = self.lock_dir / f"nc{p}.lock"
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
                _LIVE_FDS.add(fd)
                fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException as exc:  # taken (BlockingIOError) or failed: release what we hold
            for fd in reversed(fds):
                _close(fd)
            if isinstance(exc, BlockingIOError):
                return None
            raise
        note = f"pid={os.getpid()} logical={logical} lnc={self.lnc} {label}\n".encode()
        for fd in fds:  # for humans only; correctness rests on flock alone
            with suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, note, 0)
        return _Held(CoreLease(logical, physical), fds)

    @contextmanager
    def lease(self, *, timeout_seconds: float | None = None, waiting_for: str = "") -> Iterator[CoreLease]:
        """Hold one free core for exactly the with-block; if all are busy, poll with backoff and
        jitter (not FIFO, but no waiter is favoured). DeviceBusyError (retryable) after
        ``timeout_seconds``; None waits for ever.
        """
        held = self.try_acquire(waiting_for) or self._wait(timeout_seconds, waiting_for)
        try:
            yield held.lease
        finally:
            held.release()

    def _wait(self, timeout_seconds: float | None, waiting_for: str) -> _Held:
        start = time.monotonic()
        cores = ",".join(map(str, self.logical_cores))
        who = f" for {waiting_for}" if waiting_for else ""
        n = len(self.logical_cores)
        log.info("waiting%s: all %d NeuronCore(s) busy (cores %s, lnc=%d)", who, n, cores, self.lnc)
        delay = _BACKOFF_START_S
        while True:
            left = None if timeout_seconds is None else start + timeout_seconds - time.monotonic()
            if left is not None and left <= 0:
                raise DeviceBusyError(
                    f"no NeuronCore free after {timeout_seconds:g} s (cores {cores}, "
                    f"lnc={self.lnc}){who}; holders are noted in {self.lock_dir}/nc*.lock"
                )
            pause = delay * random.uniform(0.5, 1.5)
            time.sleep(pause if left is None else min(pause, left))
            delay = min(delay * 2, _BACKOFF_CAP_S)
            held = self.try_acquire(waiting_for)
            if held is not None:
                core, waited_s = held.lease.logical_core, time.monotonic() - start
                log.info("got NeuronCore %d%s after waiting %.2f s", core, who, waited_s)
                return held
