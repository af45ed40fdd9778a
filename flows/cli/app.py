"""The command group and its error boundary: whatever a command raises ends as one line and an exit code."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import click

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.flows.cli.lazy import LazyGroup
from kernelsweep.flows.cli.output import EXIT_INTERNAL, EXIT_RUN_FAILED, EXIT_SIGNAL_BASE, EXIT_USAGE, fail
from kernelsweep.importpath import append_last_resort

DEBUG_ENV = "KERNELSWEEP_DEBUG"
INTERRUPTED = EXIT_SIGNAL_BASE + signal.SIGINT  # 130, the shell's code for a process ended by Ctrl-C


# Each command's module, imported when that command runs (or help lists them): a one-point `bench` must
# not pay for `report`'s and `compare`'s imports (pyarrow datasets, scipy, ruptures), seconds on a busy host.
COMMANDS = {
    "validate": "run",
    "run": "run",
    "bench": "bench",
    "bisect": "bisect",
    "extract": "extract",
    "lineage": "lineage",
    "doctor": "doctor",
    "fleet": "fleet",
    "report": "report",
    "compare": "compare",
    "compact": "compact",
    "server": "server",
    "tuned": "tuned",
    "triage": "triage",
    "site": "site",
}


class _Boundary(LazyGroup):
    modules = COMMANDS

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except UsageError as exc:
            _debug()
            fail(exc.message, EXIT_USAGE)
        except KernelsweepError as exc:
            _debug()
            fail(exc.message, EXIT_RUN_FAILED)
        except KeyboardInterrupt:
            fail("interrupted", INTERRUPTED)
        except Exception as exc:
            _debug()
            detail = " ".join(str(exc).split())
            fail(
                f"internal error: {type(exc).__name__}: {detail}; please report it "
                f"(run again with {DEBUG_ENV}=1 for the traceback)",
                EXIT_INTERNAL,
            )


def _debug() -> None:
    if os.environ.get(DEBUG_ENV):
        import traceback

        traceback.print_exc()


@click.group(cls=_Boundary)
@click.version_option(package_name="kernelsweep")
def cli() -> None:
    """Sweep NKI kernels over shapes and platforms; results to Parquet."""
    # User kernel modules (`my_kernels:mlp`) are found in the working folder, a last resort on the
    # path: a user's own `tasks.py`, `flows/`, `numpy.py` or `opentelemetry.py` (a namespace package
    # of Prefect's) there can never shadow an installed module (kernelsweep.importpath).
    append_last_resort([os.getcwd()])


def main(argv: Sequence[str] | None = None) -> None:
    """The console script: click's own usage errors become one line too."""
    try:
        code = cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.UsageError as exc:
        hint = f"; see `kernelsweep {exc.ctx.info_name} --help`" if exc.ctx and exc.ctx.parent else ""
        fail(f"{exc.format_message().rstrip('.')}{hint}", EXIT_USAGE)
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        fail("interrupted", INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
