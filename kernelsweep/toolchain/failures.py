"""Translate a failed tool run into the error it means, once, at the boundary.

Transient failures (a NeuronCore held by another process, runtime init, timeouts) are retried by
the tasks; deterministic ones (compiler diagnostics, bad input, version skew) never are. The
patterns are the real strings from the Neuron docs and issue threads (reference sections 2 and 4).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernelsweep.errors import CaptureError, DeviceBusyError, KernelsweepError
from kernelsweep.toolchain.process import ToolResult

# (pattern, error class name, retryable, exception type), first match wins
CAPTURE_PATTERNS: Sequence[tuple[re.Pattern[str], str, bool, type[KernelsweepError]]] = (
    (re.compile(r"(Virtual )?Neuron ?Core\(s\) not available"), "DeviceBusy", True, DeviceBusyError),
    (re.compile(r"NRT_EXEC_NC_BUSY|Neuron core is locked"), "DeviceBusy", True, DeviceBusyError),
    (re.compile(r"NRT_LOAD_NOT_ENOUGH_NC"), "DeviceBusy", True, DeviceBusyError),
    (re.compile(r"nrt_init failed"), "RuntimeInit", True, CaptureError),
    (re.compile(r"No neuron device available"), "RuntimeInit", True, CaptureError),
    (re.compile(r"NRT_TIMEOUT"), "Timeout", True, CaptureError),
    (re.compile(r"NTFF version \d+ is not supported"), "VersionSkew", False, CaptureError),
    (re.compile(r"NRT_UNSUPPORTED_NEFF_VERSION"), "VersionSkew", False, CaptureError),
    (re.compile(r"NRT_EXEC_BAD_INPUT|bad input", re.I), "BadInput", False, CaptureError),
    (re.compile(r"NRT_EXEC_OOB"), "OutOfBounds", False, CaptureError),
)


def capture_failure(result: ToolResult, tool: str) -> KernelsweepError:
    if result.timed_out:
        return CaptureError(
            f"{tool} capture timed out",
            retryable=True,
            error_class="Timeout",
            argv=result.argv,
            stderr_tail=result.output,
        )
    for pattern, error_class, retryable, exc_type in CAPTURE_PATTERNS:
        match = pattern.search(result.output)
        if match:
            line = _line_of(result.output, match.start())
            return exc_type(
                f"{tool} capture failed: {line}",
                retryable=retryable,
                error_class=error_class,
                argv=result.argv,
                returncode=result.returncode,
                stderr_tail=result.output,
            )
    last = (result.output.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
    return CaptureError(
        f"{tool} capture failed: {last.strip()}",
        argv=result.argv,
        returncode=result.returncode,
        stderr_tail=result.output,
    )


def _line_of(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return " ".join(text[start : None if end < 0 else end].split())
