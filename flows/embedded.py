"""Run the sweep flow in this process on Prefect's ephemeral server, quietly.

The ephemeral server logs cancellation tracebacks from its background services when the process
exits; those are Prefect's own shutdown noise, not sweep errors, so its loggers are silenced for
the embedded run (a real server's logs are unaffected).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flows.progress import subscribe
from flows.settings import tool_paths_from_env
from flows.sweep import sweep
from kernelsweep.spec import SweepSpec
from kernelsweep.toolchain.resolve import find_neuron_tools, neuron_available

_NOISY_LOGGERS = ("prefect.server", "uvicorn", "uvicorn.error", "prefect._internal", "prefect.client")


def toolchain_notice(spec: SweepSpec) -> str | None:
    """The one-line notice `auto` owes the user when it falls back to the simulator."""
    if spec.toolchain == "auto" and not neuron_available(find_neuron_tools(extra_paths=tool_paths_from_env())):
        return "No Neuron SDK or device found: running on the simulated toolchain (every row is marked simulated)."
    return None


def run_sweep(spec: SweepSpec, on_row: Callable[[dict], None]) -> dict:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with subscribe(on_row):
        return sweep(spec)
