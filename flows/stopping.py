"""Stopping running sweeps from outside their flows: the CLI's Ctrl-C / SIGTERM handler calls
`request_stop`, every run in this process sees its own `stop` event set.

Each run has its own event (`stoppable`) rather than one shared flag, so a run can also stop
itself (its journal could not be written) without stopping anything else in the process, and a
request that came before a run started stops it as soon as it does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_active: set[threading.Event] = set()
_requested = threading.Event()


def request_stop() -> None:
    with _lock:
        _requested.set()
        for event in _active:
            event.set()


def stop_requested() -> bool:
    return _requested.is_set()


def reset() -> None:
    """Before a new run in a process that was stopped before (tests run many flows in one process)."""
    _requested.clear()


@contextmanager
def stoppable() -> Iterator[threading.Event]:
    event = threading.Event()
    with _lock:
        if _requested.is_set():
            event.set()
        _active.add(event)
    try:
        yield event
    finally:
        with _lock:
            _active.discard(event)
