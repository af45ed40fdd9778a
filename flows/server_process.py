"""What every Prefect server process kernelsweep starts runs: Prefect's own command line (`python -m
kernelsweep.flows.server_process server start ...` is `prefect server start ...`), after one fix to
Prefect on Python 3.11 and 3.12 that makes a server's writes cheaper.

Why: on PostgreSQL, asyncpg encodes every timestamp parameter as its distance from PostgreSQL's epoch,
a subtraction. A server's timestamps are Prefect's pendulum-based `DateTime` there (its deprecation
shim, `prefect.types._datetime_deprecations`; on Python 3.13 they are plain datetimes), and each such
subtraction builds a pendulum `Interval` and wraps both its ends again: about 300 per point of a sweep
(events, their resources, task runs and states), a third of a services process's CPU under py-spy
(docs/fleet.md, "Sizing past this machine"). Here a `DateTime` minus a plain `datetime` is the
plain `timedelta` that Python 3.13's Prefect computes. Pendulum's result is a `timedelta` subclass with
the same value, so code that runs on 3.13 gets what it expects; a `DateTime` minus a pendulum value, or
minus a `timedelta`, is left to pendulum. Where Prefect no longer has the shim, nothing is changed.

Run with `-m`, this module is also the `__main__` that multiprocessing's spawn imports again in each
API process of `server start --workers N`, so the fix reaches those too. Run so, it first imports the
server's modules with the cyclic collector paused and freezes them (kernelsweep.toolchain.preload): 0.6-0.8
CPU-s less at each server's start, and full collections that no longer walk them while it serves.
"""

from __future__ import annotations

import datetime
import sys
from typing import Any

from kernelsweep.toolchain.preload import import_and_freeze

# What a server's process imports before Prefect's command line runs, frozen: the API's app, or for
# `server services start` (which serves no API: the app would cost it 0.45 CPU-s) the services' base.
SERVER_MODULES = ("prefect.cli", "prefect.server.api.server")
SERVICES_MODULES = ("prefect.cli", "prefect.server.services.base")


def install() -> bool:
    """Put the fix in place in this process; False where this Prefect has no pendulum shim to fix."""
    try:
        from prefect.types._datetime_deprecations import DateTime
    except ImportError:  # Python 3.13+, or a Prefect that dropped the shim
        return False
    if getattr(DateTime.__sub__, "__kernelsweep_fix__", False):
        return True
    pendulum_sub = DateTime.__sub__
    plain_sub = datetime.datetime.__sub__

    def __sub__(self: DateTime, other: Any) -> Any:
        if type(other) is datetime.datetime and (self.tzinfo is None) == (other.tzinfo is None):
            return plain_sub(self, other)
        return pendulum_sub(self, other)

    __sub__.__kernelsweep_fix__ = True  # type: ignore[attr-defined]
    DateTime.__sub__ = __sub__  # type: ignore[method-assign]
    return True


if __name__ in ("__main__", "__mp_main__"):  # a server's process, or an API process spawn started
    import_and_freeze(SERVICES_MODULES if sys.argv[1:3] == ["server", "services"] else SERVER_MODULES)
install()

if __name__ == "__main__":
    from prefect.cli import app

    app()
