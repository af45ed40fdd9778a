"""Liveness leases on journals: a run that is still going is never taken for an interrupted one.

A run holds a lease on its journal for as long as it lives, and `kernelsweep run` holds one on its
spec (`<run key>/.live`), so a second run of the same spec, or a second resume of one run, is
refused at once, naming the process that holds it, instead of measuring the same points in
parallel and throwing its work away. Refused, not queued: a second run that waited would then
resume a run that has finished, that is start the whole sweep again, which is rarely what the
second invocation wanted (a cron overlap, a retry while the first is still going); whoever
started it can see who holds the spec and decide.

In a folder the lease is `fcntl.flock` on a file in the journal: the kernel drops it when the
holder dies, however it dies (SIGKILL included), so there is nothing stale to clean up; the file
holds the holder's host and pid for the message. On S3 it is a heartbeat object
(`<name>.lease.json`), created only if absent (`If-None-Match: *`), renewed every
`HEARTBEAT_SECONDS` only while it is still the holder's (`If-Match`), taken over only once it has
expired (`LEASE_EXPIRY_SECONDS` after its last renewal, by the writer's clock) and deleted on
release: a run killed with SIGKILL keeps its S3 journal's lease for at most that long.

Within one process a lease is shared (counted): the sweep flow and its shards, or the CLI and the
flow it starts, use the same journal. Leases held by this process are dropped at exit.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import logging
import os
import socket
import stat
import threading
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.errors import StoreError
from kernelsweep.results.journal_files import JOURNAL_FOLDER
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

LEASE_EXPIRY_SECONDS = 120.0
HEARTBEAT_SECONDS = 30.0
NOTE_WAIT_SECONDS = 2.0  # at most, for a holder's note between its lock and its write
log = logging.getLogger(__name__)


class RunIsLive(StoreError):
    """Another process holds the lease: refused before anything ran (exit 3: run again once it is over)."""


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    since: str
    what: str  # "run <id>" or "a run of this spec"
    expires_at: str | None = None  # S3 only

    def describe(self) -> str:
        until = f", its lease expires at {self.expires_at} if it died" if self.expires_at else ""
        if not self.pid:  # its note unreadable, and no table of this host's locks names it
            return f"{self.what} is live (its holder left no readable note{until})"
        return f"{self.what} is live: pid {self.pid} on {self.host}, since {self.since}{until}"

    def to_json(self, expires_at: str | None = None) -> bytes:
        return json.dumps({"host": self.host, "pid": self.pid, "since": self.since, "what": self.what,
                           "expires_at": expires_at, "token": uuid.uuid4().hex}).encode()  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes | None) -> Holder:
        """Whatever the object holds: a lease is never refused for its note being unreadable."""
        try:
            doc = json.loads(data or b"")
            return cls(str(doc["host"]), int(doc["pid"]), str(doc["since"]), str(doc["what"]), doc.get("expires_at"))
        except (ValueError, KeyError, TypeError):
            return cls("an unknown host", 0, "an unknown time", "a run")


class Lease(Protocol):
    def try_acquire(self, me: Holder) -> Holder | None:
        """None when acquired; else who holds it."""

    def release(self) -> None: ...


class _FolderLease:
    def __init__(self, path: Path) -> None:
        self.path, self.fd = path, -1

    def try_acquire(self, me: Holder) -> Holder | None:
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _note(fd)
                os.close(fd)
                return holder
            if self._still_there(fd):  # not unlinked by a holder releasing it meanwhile
                break
            os.close(fd)
        with suppress(OSError):  # the note is for people; the flock alone decides
            os.pwrite(fd, me.to_json(), 0)
        self.fd = fd
        return None

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise StoreError(f"lease {self.path} cannot be opened ({exc.strerror})", retryable=False) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StoreError(f"lease {self.path} is not a regular file; remove it", retryable=False)
        return fd

    def _still_there(self, fd: int) -> bool:
        try:
            return os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Unlinked while still locked, then closed: an opener that got the old file sees it is gone."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            with suppress(OSError):
                self.path.unlink()
            os.close(fd)
            with suppress(OSError):  # the spec's folder, when nothing else is in it
                self.path.parent.rmdir()


def _note(fd: int) -> Holder:
    """The holder writes its note just after taking the lock: a refused run that reads in between
    waits a moment for it, so the message names the holder rather than "an unknown host"."""
    deadline = time.monotonic() + NOTE_WAIT_SECONDS
    while True:
        holder = Holder.from_json(os.pread(fd, 4096, 0))
        if holder.pid:
            return holder
        if time.monotonic() > deadline:  # no note it could write (a full disk), or one spoilt since
            pid = _flock_holder(fd)
            return replace(holder, host=socket.gethostname(), pid=pid) if pid else holder
        time.sleep(0.01)


def _flock_holder(fd: int) -> int | None:
    """The pid holding a flock on `fd`'s file, from the kernel's own table (Linux's /proc/locks): the
    holder is a process of this host whatever its note says."""
    info = os.fstat(fd)
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            return int(fields[4])
    return None


class _S3Lease:
    def __init__(self, where: s3.S3Location, name: str, client: s3.S3Client) -> None:
        self.where, self.key, self.client = where, where.key(f"{name}.lease.json"), client
        self.etag: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def try_acquire(self, me: Holder) -> Holder | None:
        if self._put(me, if_none_match=True) is None:
            self._started(me)
            return None
        current, etag = self._read()
        if current is None or etag is None:  # released in between: whoever asks next gets it
            return Holder.from_json(None)
        if current.expires_at is not None and _parse(current.expires_at) > datetime.now(UTC) and _alive(current):
            return current
        if self._put(me, if_match=etag) is not None:  # someone else took it over first
            return self._read()[0] or current
        log.warning("took over the lease of %s, whose holder is gone (%s)", current.what, self.where.uri(self.key))
        self._started(me)
        return None

    def _started(self, me: Holder) -> None:
        """Renewed from now on, until released."""
        self._stop.clear()
        self._beat = threading.Thread(target=self._renew, args=(me,), name="journal-lease", daemon=True)
        self._beat.start()

    def _renew(self, me: Holder) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                if self._put(me, if_match=self.etag) is not None:
                    log.warning("lost the lease %s to another run", self.where.uri(self.key))
                    return
            except StoreError as exc:  # the location is down: the journal's own writes will say so
                log.warning("renewing the lease %s failed: %s", self.where.uri(self.key), exc.message)

    def _put(self, me: Holder, *, if_none_match: bool = False, if_match: str | None = None) -> str | None:
        """None when written (the etag is kept); else "taken" (the condition failed)."""
        expires = (datetime.now(UTC) + timedelta(seconds=LEASE_EXPIRY_SECONDS)).isoformat(timespec="seconds")
        extra = {"IfNoneMatch": "*"} if if_none_match else {"IfMatch": if_match} if if_match else {}
        try:
            answer = self.client.put_object(Bucket=self.where.bucket, Key=self.key, Body=me.to_json(expires), **extra)
        except ClientError as exc:
            if s3.error_code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return "taken"
            raise s3.translate(exc, f"writing the lease {self.where.uri(self.key)}") from exc
        except BotoCoreError as exc:
            raise s3.translate(exc, f"writing the lease {self.where.uri(self.key)}") from exc
        self.etag = answer.get("ETag")
        return None

    def _read(self) -> tuple[Holder | None, str | None]:
        try:
            answer = self.client.get_object(Bucket=self.where.bucket, Key=self.key)
            return Holder.from_json(answer["Body"].read()), answer.get("ETag")
        except ClientError as exc:
            if s3.error_code(exc) in ("404", "NoSuchKey"):
                return None, None
            raise s3.translate(exc, f"reading the lease {self.where.uri(self.key)}") from exc
        except BotoCoreError as exc:
            raise s3.translate(exc, f"reading the lease {self.where.uri(self.key)}") from exc

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
            self._beat = None
            with suppress(BotoCoreError, ClientError):  # it expires anyway
                self.client.delete_object(Bucket=self.where.bucket, Key=self.key)


def _alive(holder: Holder) -> bool:
    """False only when the holder is known dead: a process of this host that is gone, or this very
    process (which asks only for leases it does not hold: one it could not delete when it let go)."""
    if holder.host != socket.gethostname():
        return True
    if holder.pid == os.getpid():
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return holder.pid > 0


def _parse(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class _Held:
    def __init__(self, lease: Lease) -> None:
        self.lease, self.count = lease, 1


_held: dict[str, _Held] = {}
_held_lock = threading.Lock()


def acquire(uri: str, lease: Lease, what: str) -> None:
    """Hold `lease` (shared with whoever in this process holds it already), or raise RunIsLive."""
    with _held_lock:
        if uri in _held:
            _held[uri].count += 1
            return
        me = Holder(socket.gethostname(), os.getpid(), datetime.now(UTC).isoformat(timespec="seconds"), what)
        holder = lease.try_acquire(me)
        if holder is not None:
            raise RunIsLive(
                f"{holder.describe()} ({uri}); nothing was run: wait for it to finish or stop it, then run again",
                error_class="RunIsLive",
            )
        _held[uri] = _Held(lease)


def release(uri: str) -> None:
    with _held_lock:
        held = _held.get(uri)
        if held is None:
            return
        held.count -= 1
        if held.count == 0:
            del _held[uri]
            held.lease.release()


@atexit.register
def _release_all() -> None:
    """At exit, whatever this process still holds (the spec's lease `kernelsweep run` keeps for its
    whole life, a resumed run's lease its CLI planned): a flock would go with the process anyway, but an
    S3 heartbeat object would stay until it expired and read as a live run meanwhile."""
    with _held_lock:
        held = list(_held.values())
        _held.clear()
    for h in held:
        with suppress(Exception):  # exiting: a lease that cannot be deleted expires by itself
            h.lease.release()


def holds(uri: str) -> bool:
    with _held_lock:
        return uri in _held


def open_lease(results: Location | str, key: str, run_id: str | None = None) -> tuple[str, Lease]:
    """(uri, lease) of run `run_id`'s journal under `<results>/_journal/<key>`, or of the spec (`key`)."""
    where = parse_location(results, "results location").child(JOURNAL_FOLDER)
    if isinstance(where, s3.S3Location):
        name = f"{key}/{run_id}" if run_id else key
        return where.uri(where.key(f"{name}.lease.json")), _S3Lease(where, name, s3.make_client())
    path = where.path / key / (f".{run_id}.live" if run_id else ".live")
    return str(path), _FolderLease(path)
