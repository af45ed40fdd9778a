"""Run the sweep flow in this process on Prefect's ephemeral server, quietly.

The ephemeral server logs cancellation tracebacks from its background services when the process
exits; those are Prefect's own shutdown noise, not sweep errors, so its loggers are silenced for
the embedded run (a real server's logs are unaffected).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flows.progress import subscribe
from flows.settings import locations_from_env
from flows.sweep import sweep
from kernelsweep.spec import SweepSpec
from kernelsweep.toolchain.resolve import resolve_toolchain

_NOISY_LOGGERS = ("prefect.server", "uvicorn", "uvicorn.error", "prefect._internal", "prefect.client")


def toolchain_notice(spec: SweepSpec) -> str | None:
    """Resolve the toolchain as the flow will, before any work: the user sees `auto`'s fallback
    notice up front, and `--toolchain neuron` on a host without the SDK fails here with exit 2."""
    locations = locations_from_env()
    return resolve_toolchain(spec.toolchain, locations.sim_state_dir, extra_paths=locations.tool_paths)[1]


def run_sweep(spec: SweepSpec, on_row: Callable[[dict], None]) -> dict:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with subscribe(on_row):
        return sweep(spec)
