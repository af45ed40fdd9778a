"""The CLI's two streams and its exit codes: tables and results on stdout, everything else on stderr."""

from __future__ import annotations

import sys
from typing import NoReturn

from rich.console import Console
from rich.markup import escape

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_RUN_FAILED = 3
EXIT_INTERNAL = 4
EXIT_SIGNAL_BASE = 128  # interrupted: 128 + the signal, as shells report it (130 Ctrl-C, 143 SIGTERM)

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 160)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """One line on stderr, then exit: what went wrong and what to do about it."""
    console.print(f"[red]error:[/red] {escape(' '.join(message.split()))}", highlight=False, soft_wrap=True)
    sys.exit(code)
