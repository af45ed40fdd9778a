"""Scratch folders with an owner: a stage's working files (a capture's NEFF, inputs and repeats), or
the tracer probe's at a run's start, in a `kernelsweep-<stage>-*` folder of the temporary folder,
removed when the stage ends.

A process killed mid-stage cannot remove its folder, and a fleet host that crashes nightly would
fill its disk with them. So each folder holds a mark naming its process (pid and the kernel's start
time of that pid, which a reused pid does not share), and the next run on the host removes the
folders whose process is gone, never a live one's. `kernelsweep doctor` says how much is left.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "kernelsweep-"
STAGES = ("trace", "compile", "inputs", "capture", "extract", "neff-check", "probe")  # those that make scratch folders
MARK = ".kernelsweep-owner"  # `<pid> <start time>`

log = logging.getLogger(__name__)


@contextmanager
def scratch(stage: str) -> Iterator[Path]:
    """A marked folder for one stage's files, gone when the stage ends (however it ends, short of a kill)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{stage}-"))
    try:
        (folder / MARK).write_text(_owner(os.getpid()) or "")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_orphans(temp: Path | None = None) -> int:
    """Removes the scratch folders whose process is gone (one notice saying how many and how much);
    their count."""
    removed, size = 0, 0
    for folder in _folders(temp):
        if _orphaned(folder):
            size += _size(folder)
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    if removed:
        log.warning("removed %d scratch folder(s) of runs that died (%.1f MiB)", removed, size / 2**20)
    return removed


def left(temp: Path | None = None) -> tuple[int, int, int]:
    """(folders, bytes, of them orphaned): what scratch folders the temporary folder holds now."""
    folders = _folders(temp)
    return len(folders), sum(_size(f) for f in folders), sum(_orphaned(f) for f in folders)


def _folders(temp: Path | None) -> list[Path]:
    root = temp or Path(tempfile.gettempdir())
    try:
        found = [p for stage in STAGES for p in root.glob(f"{PREFIX}{stage}-*")]
    except OSError:
        return []
    uid = os.geteuid()
    return [p for p in found if p.is_dir() and not p.is_symlink() and _owned_by(p, uid)]


def _owned_by(path: Path, uid: int) -> bool:
    try:
        return path.stat().st_uid == uid
    except OSError:
        return False


def _orphaned(folder: Path) -> bool:
    """True only when the mark names a process that is gone (or a pid another process has since): a
    folder without a readable mark (just made, or an older kernelsweep's) is left alone."""
    try:
        pid_text, started = (folder / MARK).read_text().split(" ", 1)
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    return _owner(pid) != f"{pid} {started}"


def _owner(pid: int) -> str | None:
    """`<pid> <start time>` of a live process (its start time in clock ticks since boot, from
    /proc/<pid>/stat), or None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    return f"{pid} {fields[19]}" if len(fields) > 19 else None


def _size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            pass
    return total
