"""Run the sweep flow in this process on Prefect's ephemeral server, quietly.

The ephemeral server logs cancellation tracebacks from its background services when the process
exits; those are Prefect's own shutdown noise, not sweep errors, so its loggers are silenced for
the embedded run (a real server's logs are unaffected).
"""

from __future__ import annotations

import logging

from kernelsweep.flows.progress import Listener, subscribe
from kernelsweep.flows.sweep import sweep
from kernelsweep.results.summary import SweepReport
from kernelsweep.spec import SweepSpec

_NOISY_LOGGERS = ("prefect.server", "uvicorn", "uvicorn.error", "prefect._internal", "prefect.client")


def run_sweep(spec: SweepSpec, on_row: Listener) -> SweepReport:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with subscribe(on_row):
        return sweep(spec)
