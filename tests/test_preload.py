"""kernelsweep.toolchain.preload: the modules a long-lived or forking process imports, imported with the cyclic
collector paused and then frozen. Checked in fresh interpreters: freezing is for the whole process."""

from __future__ import annotations

import json
import subprocess
import sys

SHOW = """
import gc, json, sys
from kernelsweep.toolchain.preload import import_and_freeze
before = gc.get_freeze_count()
try:
    import_and_freeze(sys.argv[1:])
    error = None
except ImportError as exc:
    error = type(exc).__name__
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(), "enabled": gc.isenabled(),
                  "imported": [m for m in sys.argv[1:] if m in sys.modules], "error": error}))
"""


def _show(*modules: str) -> dict:
    done = subprocess.run([sys.executable, "-P", "-c", SHOW, *modules], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_modules_are_imported_and_what_the_process_holds_is_frozen_with_the_collector_back_on():
    shown = _show("decimal", "fractions")
    assert shown["imported"] == ["decimal", "fractions"] and shown["error"] is None
    assert shown["before"] == 0 and shown["frozen"] > 5_000  # the interpreter's objects and the modules'
    assert shown["enabled"]


def test_a_module_that_fails_to_import_leaves_the_collector_on():
    shown = _show("decimal", "kernelsweep_no_such_module")
    assert shown["error"] == "ModuleNotFoundError" and shown["imported"] == ["decimal"]
    assert shown["enabled"] and shown["frozen"] > 0
