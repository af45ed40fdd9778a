"""The stage tasks' retry decision, from the raised error's `retryable` alone."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelsweep.errors import CaptureError, CompileError, DeviceBusyError, StoreError
from kernelsweep.tasks.policy import retry_if_transient, transient_retries


def _state(error: BaseException) -> SimpleNamespace:
    """What Prefect hands the condition: a failed state whose result is the raised exception."""
    return SimpleNamespace(result=lambda raise_on_failure=True: error)


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (DeviceBusyError("core busy"), True),
        (CaptureError("timed out", retryable=True, error_class="Timeout"), True),
        (StoreError("S3 503", retryable=True), True),
        (CompileError("[NCC_EVRF009] too big"), False),
        (CaptureError("NRT_EXEC_BAD_INPUT"), False),
        (ValueError("a bug"), False),
    ],
)
def test_only_transient_failures_are_retried(error, retried):
    assert retry_if_transient(None, None, _state(error)) is retried


def test_the_retry_options_carry_the_condition():
    options = transient_retries()
    assert options["retries"] > 0 and options["retry_condition_fn"] is retry_if_transient
