"""Folders on the import path as a last resort: they serve a top-level module only when nothing else
on the path provides that name, not even as part of a namespace package.

A user's kernel modules (`my_kernels:mlp`) live in the working folder, so the CLI puts that folder on
the import path, and hands its path to the processes that import kernels (the simulated tools, the
trace worker). Appending a folder to `sys.path` is not enough to keep it from shadowing anything:
Python prefers a plain module found in a later entry over a namespace package whose portions came
first, so an `opentelemetry.py` in the working folder would replace Prefect's installed
`opentelemetry` (a namespace package) even from the end of the path. A path-entry finder for these
folders declines any name the rest of the path provides.

A name that nothing installed provides is still served from such a folder: that is how a user's own
kernel module is found at all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    ModuleSpec,
    PathFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from types import ModuleType

_LOADERS = (
    (ExtensionFileLoader, EXTENSION_SUFFIXES),
    (SourceFileLoader, SOURCE_SUFFIXES),
    (SourcelessFileLoader, BYTECODE_SUFFIXES),
)
_last_resort: set[str] = set()


def append_last_resort(folders: Iterable[str]) -> None:
    """Append each folder not yet on `sys.path`, as a last resort (a folder already there, say from
    PYTHONPATH, keeps the place it was given)."""
    if _hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _hook)
    for folder in folders:
        if folder and folder not in sys.path:
            _last_resort.add(folder)
            sys.path_importer_cache.pop(folder, None)
            sys.path.append(folder)


def _hook(entry: str) -> _LastResortFinder:
    if entry not in _last_resort:
        raise ImportError("not a last-resort folder")  # the next hook (the usual file finder) takes it
    return _LastResortFinder(entry)


class _LastResortFinder:
    """Python's own file finder for `folder`, declining top-level names found elsewhere on the path."""

    def __init__(self, folder: str) -> None:
        self._files = FileFinder(folder, *_LOADERS)

    def find_spec(self, fullname: str, target: ModuleType | None = None) -> ModuleSpec | None:
        if "." not in fullname:
            # "" is the working folder (`python -c`, a REPL): Python looks it up as os.getcwd(), which
            # may be a last-resort folder itself, and asking it again here would recurse for ever
            elsewhere = [entry for entry in sys.path if (entry or os.getcwd()) not in _last_resort]
            if PathFinder.find_spec(fullname, elsewhere) is not None:
                return None
        return self._files.find_spec(fullname, target)

    def invalidate_caches(self) -> None:
        self._files.invalidate_caches()
