"""Host-local, crash-safe, LNC-aware exclusive leases on NeuronCores.

The Neuron runtime reserves every visible NeuronCore for its process, so two captures on one core
fail or skew each other's numbers. Each PHYSICAL core gets a lock file ``<lock_dir>/nc<p>.lock``
held with ``fcntl.flock``: the kernel drops the lock when the holder closes the fd or dies, so a
crashed capture never leaves a stale lock and there is nothing to clean up. flock conflicts between
separately opened fds even inside one process, so the same mechanism serialises threads too.
Locking physical (not logical) cores keeps leasers with different LNC settings consistent.
Lock files are never deleted: unlinking a locked file would let the next opener lock a new inode.

The lock folder is private to its user (mode 0700, owned by them, not a symbolic link) and lock
files are opened without following links and checked to be the user's own regular files, so
another local user can neither plant a lock nor redirect a write. A capture that has to wait says
which cores it waits for and who holds them (pid and command, from /proc/locks or the holder's
note), and gives up after the leaser's wait timeout with a non-retryable error: a wedged holder
becomes a failed row, not a hang. Setting the leaser's `stop` event ends every wait at once.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import re
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import CaptureError, DeviceBusyError, UsageError

log = logging.getLogger(__name__)

_BACKOFF_START_S = 0.005
_BACKOFF_CAP_S = 0.5
_NOTE_PID = re.compile(rb"pid=([0-9]+)")
PROC_LOCKS = Path("/proc/locks")
COMMAND_CHARS = 240

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
    """Hands out exclusive leases on ``logical_cores``; one logical core = ``lnc`` physical.

    A lease that has waited ``wait_timeout_seconds`` (None: no limit) fails; ``stop`` ends waits early.
    """

    def __init__(
        self,
        lock_dir: str | os.PathLike,
        logical_cores: Sequence[int],
        lnc: int = 1,
        *,
        wait_timeout_seconds: float | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        if lnc < 1:
            raise ValueError(f"lnc must be >= 1, got {lnc}")
        cores = list(logical_cores)
        if not cores or min(cores) < 0 or len(set(cores)) != len(cores):
            raise ValueError(f"logical_cores must be distinct non-negative ids, got {cores}")
        self.lock_dir, self.logical_cores, self.lnc = Path(lock_dir), cores, lnc
        self.wait_timeout_seconds, self.stop = wait_timeout_seconds, stop or threading.Event()
        private_folder(self.lock_dir, "lock folder")

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
                fd = _open_lock_file(self._path(p))
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

    def _path(self, physical: int) -> Path:
        return self.lock_dir / f"nc{physical}.lock"

    @contextmanager
    def lease(self, *, timeout_seconds: float | None = None, waiting_for: str = "") -> Iterator[CoreLease]:
        """Hold one free core for exactly the with-block; if all are busy, poll with backoff and
        jitter (not FIFO, but no waiter is favoured). After ``timeout_seconds`` (default: the
        leaser's wait timeout) a non-retryable DeviceBusyError: the wait already lasted that long.
        """
        held = self.try_acquire(waiting_for) or self._wait(
            self.wait_timeout_seconds if timeout_seconds is None else timeout_seconds, waiting_for
        )
        try:
            yield held.lease
        finally:
            held.release()

    def holders(self) -> str:
        """Who holds each busy core: `core 0: pid 4242 (python wedge.py)`, `core 1: this process`."""
        parts = []
        for logical in self.logical_cores:
            pids = sorted({pid for p in self.physical_cores(logical) for pid in _holder_pids(self._path(p))})
            if pids:
                parts.append(f"core {logical}: " + ", ".join(_describe(pid) for pid in pids))
        return "; ".join(parts) or "holders unknown"

    def _wait(self, timeout_seconds: float | None, waiting_for: str) -> _Held:
        start = time.monotonic()
        cores = ",".join(map(str, self.logical_cores))
        who = f" for {waiting_for}" if waiting_for else ""
        n = len(self.logical_cores)
        log.info("waiting%s: all %d NeuronCore(s) busy (cores %s, lnc=%d)", who, n, cores, self.lnc)
        holders = self.holders()
        limit = "no time limit" if timeout_seconds is None else f"giving up after {timeout_seconds:g} s"
        if "pid " in holders:  # held by another process: worth telling whoever runs the sweep
            log.warning("waiting%s: every NeuronCore is busy (%s); %s", who, holders, limit)
        delay = _BACKOFF_START_S
        while True:
            left = None if timeout_seconds is None else start + timeout_seconds - time.monotonic()
            if self.stop.is_set():
                raise DeviceBusyError(f"stopped while waiting{who} for a NeuronCore", retryable=False)
            if left is not None and left <= 0:
                raise DeviceBusyError(
                    f"no NeuronCore free after {timeout_seconds:g} s (cores {cores}, lnc={self.lnc}){who}; "
                    f"{self.holders()}; stop the holder or raise the lease timeout",
                    retryable=False,
                    error_class="LeaseTimeout",
                )
            pause = delay * random.uniform(0.5, 1.5)
            self.stop.wait(pause if left is None else min(pause, left))
            delay = min(delay * 2, _BACKOFF_CAP_S)
            held = self.try_acquire(waiting_for)
            if held is not None:
                core, waited_s = held.lease.logical_core, time.monotonic() - start
                log.info("got NeuronCore %d%s after waiting %.2f s", core, who, waited_s)
                return held


def private_folder(path: Path, what: str) -> Path:
    """Create `path` (mode 0700) or check an existing one: a real folder, the user's own, closed to others.

    A folder another user made (say, in a shared temporary folder, before us), a symbolic link, or a
    folder others may enter is refused: whoever can reach it could read our state or swap our lock
    files. An existing folder is never changed (it may be one the user cares about, like $HOME).
    """
    try:
        for folder in reversed([p for p in (path, *path.parents) if not p.exists()]):
            folder.mkdir(mode=0o700, exist_ok=True)  # every folder made here is private, not just the last
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise UsageError(f"{what} {path} is not a folder (a symbolic link or a file); remove it or choose another")
        if info.st_uid != os.geteuid():
            raise UsageError(
                f"{what} {path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}); "
                "remove it or choose another folder"
            )
        if info.st_mode & 0o077:
            raise UsageError(
                f"{what} {path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
                "chmod 700 it or choose a private folder"
            )
        _check_parents(path, what)
    except OSError as exc:
        raise UsageError(f"{what} {path} cannot be used ({exc.strerror}); choose another folder") from None
    return path


def _check_parents(path: Path, what: str) -> None:
    """A private folder is only as safe as the folders above it: whoever may write one of them can
    rename ours away and put their own in its place. A folder others may write passes only with the
    sticky bit (as /tmp has: then only an entry's owner may rename it)."""
    for parent in path.absolute().parents:
        info = os.stat(parent)
        shared = info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_uid not in (0, os.geteuid()))
        if shared and not info.st_mode & stat.S_ISVTX:
            owner = "yours" if info.st_uid == os.geteuid() else f"uid {info.st_uid}'s"
            raise UsageError(
                f"{what} {path} is inside {parent} ({owner}, mode {stat.S_IMODE(info.st_mode):o}), which others may "
                "write without a sticky bit, so they could replace it; choose a folder under one of your own"
            )


def _open_lock_file(path: Path) -> int:
    """The user's own regular file, never followed through a link (O_NOFOLLOW)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        message = f"lease file {path} cannot be opened safely ({reason})"
        raise CaptureError(message, error_class="UnsafeLeaseFile") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        raise CaptureError(
            f"lease file {path} is not your own regular file (uid {info.st_uid}); remove it",
            error_class="UnsafeLeaseFile",
        )
    return fd


def _holder_pids(path: Path) -> set[int]:
    """The processes holding `path`'s flock, from /proc/locks; else the pid its holder noted in it."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return set()
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with suppress(OSError):
        fields = (line.split() for line in PROC_LOCKS.read_text().splitlines())
        pids = {int(f[4]) for f in fields if len(f) > 5 and f[1] == "FLOCK" and f[5] == device and f[4].isdigit()}
        if pids:
            return pids
    with suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            match = _NOTE_PID.search(os.read(fd, 256))
        finally:
            os.close(fd)
        if match:
            return {int(match.group(1))}
    return set()


def _describe(pid: int) -> str:
    if pid == os.getpid():
        return "this process"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        command = " ".join(" ".join(a.decode(errors="replace").split()) for a in argv if a)
    except OSError:
        return f"pid {pid}"
    return f"pid {pid} ({command[:COMMAND_CHARS]})" if command else f"pid {pid}"
