"""The simulator's stand-in tools called in this process instead of started as one.

For datasets built only to feed the report's statistics (tests/report_data.py's nights): a night of 3
points at 7 repeats launches about 50 tools, each an interpreter importing numpy, so 23 nights cost
minutes of CPU that no assertion reads. Every other test crosses the real process boundary. Here each
stand-in's `main(argv)` runs with the argv, environment, working folder, stdout, stderr and exit code
the subprocess would have had; the adapters build the same argv and parse the same output, and tools
that are not the simulator's own (the trace worker) still run as processes.

One stand-in runs at a time (each owns the process's environment and folder while it runs), so the
caller must not start tools from other threads meanwhile: `Nights` runs its points one by one here.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path

import pytest

from kernelsweep.sim import neuron_ls, neuron_profile, neuronx_cc
from kernelsweep.toolchain import process
from kernelsweep.toolchain.prefork_client import entry_point
from kernelsweep.toolchain.process import Slots, ToolResult

ENTRIES: dict[str, Callable[[list[str]], int]] = {
    "kernelsweep.sim.neuronx_cc": neuronx_cc.main,
    "kernelsweep.sim.neuron_profile": neuron_profile.main,
    "kernelsweep.sim.neuron_explorer": partial(neuron_profile.main, prog="neuron-explorer"),
    "kernelsweep.sim.neuron_ls": neuron_ls.main,
}
_one_at_a_time = threading.Lock()


def _entry(argv: list[str]) -> tuple[Callable[[list[str]], int], list[str]] | None:
    """The stand-in's `main` and its arguments when argv is sim_toolchain's command for
    `kernelsweep.sim.<tool>` (forked from the template, or `python -P -m`)."""
    entry = entry_point(argv) if argv[0] == sys.executable else None
    return (ENTRIES[entry[0]], entry[1]) if entry and entry[0] in ENTRIES else None


@contextlib.contextmanager
def _as_the_process(env: Mapping[str, str], cwd: str | Path | None) -> Iterator[None]:
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_tool(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    unset: Sequence[str] = (),
    timeout_seconds: float,
    slots: Slots | None = None,
    launch: Callable[..., ToolResult] = process.run_tool,
) -> ToolResult:
    """`process.run_tool`'s contract; the simulator's stand-ins run here, anything else through `launch`."""
    argv = [str(a) for a in argv]
    entry = _entry(argv)
    if entry is None or slots is not None:
        return launch(argv, cwd=cwd, env=env, unset=unset, timeout_seconds=timeout_seconds, slots=slots)
    main, args = entry
    full_env = {k: v for k, v in os.environ.items() if k not in unset} | dict(env or {})
    stdout, stderr = io.StringIO(), io.StringIO()
    with _one_at_a_time, _as_the_process(full_env, cwd):
        started = time.monotonic()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(args)
            except SystemExit as exit_:  # argparse's usage errors, sys.exit in the tool
                code = exit_.code if isinstance(exit_.code, int) else 1
            except Exception:  # an uncaught error: Python prints it and exits 1
                traceback.print_exc()
                code = 1
        seconds = time.monotonic() - started
    return ToolResult(argv, code, stdout.getvalue(), stderr.getvalue(), env=dict(env or {}), seconds=seconds)


@contextlib.contextmanager
def standins_in_process() -> Iterator[None]:
    """Every loaded kernelsweep module's `run_tool` (the adapters import it by name) replaced by this one."""
    original = process.run_tool
    with pytest.MonkeyPatch.context() as patch:
        for name, module in list(sys.modules.items()):
            if name.startswith("kernelsweep") and getattr(module, "run_tool", None) is original:
                patch.setattr(module, "run_tool", partial(run_tool, launch=original))
        yield
