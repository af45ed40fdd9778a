"""How a simulated tool's process starts and ends.

It arms the parent-death signal first (the tool dies with the run that started it), and ends with
`os._exit` once its output is flushed: the real tools are native programs, and a Python interpreter's
shutdown (module teardown, a last garbage collection) cost about 12 ms of CPU per launch here, a
tenth of a capture's, for nothing a caller can see. The tools write their files inside `with`
blocks and register no exit handlers, so nothing is left unwritten.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


def run_tool_main(main: Callable[[], int]) -> NoReturn:
    """Run a tool's `main` as its process's whole life; an exception still ends it the usual way."""
    from kernelsweep.toolchain.parent_death import arm

    arm()
    try:
        code = main()
    except SystemExit as exc:  # argparse's usage errors and --help: already printed, an int code
        code = exc.code if isinstance(exc.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
