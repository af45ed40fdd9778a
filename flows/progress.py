"""Point-completion events from a running sweep, for whoever shows progress (the CLI's bar).

Flow parameters must be serialisable, so a callback cannot be passed in; listeners subscribe
here for the duration of an in-process run instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kernelsweep.results import RowSummary

Listener = Callable[[RowSummary], None]
_listeners: list[Listener] = []


@contextmanager
def subscribe(listener: Listener) -> Iterator[None]:
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def publish(row: RowSummary) -> None:
    for listener in list(_listeners):
        listener(row)
