"""The one error root of kernelsweep.

Errors carry data, not just text, so that retry decisions and result rows never have to re-parse
messages::

    KernelsweepError                 message, stage, retryable, error_class, argv, returncode, stderr_tail
    +-- UsageError                   bad spec / bad CLI input; exit code 2, raised before any work
    |   +-- InvalidShapeError        a kernel cannot run these parameters (also a ValueError)
    +-- ToolNotFoundError            an external executable is missing
    +-- DeviceListError              `neuron-ls` failed or printed what cannot be parsed
    +-- TraceError                   stage "trace"
    +-- CompileError                 stage "compile"
    +-- CaptureError                 stage "capture"
    |   +-- DeviceBusyError          NeuronCore held by another process (retryable)
    +-- ExtractError                 stage "extract"
    +-- StoreError                   stage "store"

`retryable` is the single source of truth for the task retry policy: transient failures (busy
core, runtime init, timeouts) set it, deterministic ones (compiler diagnostics, bad input, kernel
constraint violations) do not.
"""

from __future__ import annotations

from collections.abc import Sequence

STDERR_TAIL_CHARS = 2000


class KernelsweepError(Exception):
    stage: str | None = None
    default_retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        error_class: str | None = None,
        argv: Sequence[str] | None = None,
        returncode: int | None = None,
        stderr_tail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = self.default_retryable if retryable is None else retryable
        self.error_class = error_class or type(self).__name__
        self.argv = list(argv) if argv is not None else None
        self.returncode = returncode
        self.stderr_tail = stderr_tail[-STDERR_TAIL_CHARS:] if stderr_tail else None

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # keep the data when Prefect pickles a failed state
        return (_rebuild, (type(self), self.message, self.__dict__))


def _rebuild(cls: type[KernelsweepError], message: str, state: dict) -> KernelsweepError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class UsageError(KernelsweepError):
    """A user mistake: the CLI prints it on one line and exits 2."""


class InvalidShapeError(UsageError, ValueError):
    """A point the kernel cannot run; the message says which limit and how to fix it."""


class ToolNotFoundError(KernelsweepError):
    pass


class DeviceListError(KernelsweepError):
    """The device inventory could not be read: nothing can be captured on this host."""


class TraceError(KernelsweepError):
    stage = "trace"


class CompileError(KernelsweepError):
    stage = "compile"


class CaptureError(KernelsweepError):
    stage = "capture"


class DeviceBusyError(CaptureError):
    default_retryable = True


class ExtractError(KernelsweepError):
    stage = "extract"


class StoreError(KernelsweepError):
    stage = "store"
