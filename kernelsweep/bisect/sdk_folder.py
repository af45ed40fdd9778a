"""A folder of SDK environments as the builds a bisection walks (`kernelsweep bisect --sdk-folder`).

Each venv in the folder (a subfolder with bin/python) is one SDK build. Its place in release order is
the compiler it holds, asked of the venv itself as a row would report it: its `neuronx-cc --version`
when the venv has the command, else the `neuronx-cc` package its python sees. Folder names are not
read: a venv named `sdk-latest` or `2.9` sorts by what it holds (2.9 < 2.10: versions compare by their
numeric parts). A venv without a usable compiler (none, PyPI's placeholder) is left out; two venvs
holding the same compiler are one build given twice, which is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernelsweep.errors import UsageError
from kernelsweep.sim.culprit_build import version_key
from kernelsweep.toolchain.compiler import parse_compiler_version
from kernelsweep.toolchain.packages import PLACEHOLDER_VERSIONS
from kernelsweep.toolchain.process import run_tool

_ASK = "from importlib import metadata\ntry: print(metadata.version('neuronx-cc'))\nexcept Exception: pass"
ASK_SECONDS = 60


def sdk_environments(folder: Path) -> list[tuple[str, str]]:
    """(compiler version, python) of each usable venv in `folder`, in release order; at least two."""
    if not folder.is_dir():
        raise UsageError(f"--sdk-folder {folder}: no such folder; give the folder that holds the SDK venvs")
    found: dict[str, str] = {}
    for venv in sorted(p for p in folder.iterdir() if p.is_dir()):
        python = venv / "bin" / "python"
        version = compiler_of(python) if os.access(python, os.X_OK) else None
        if version is None:
            continue
        if version in found:
            raise UsageError(
                f"--sdk-folder {folder}: {Path(found[version]).parent.parent.name} and {venv.name} both hold "
                f"neuronx-cc {version}; keep one venv per SDK build"
            )
        found[version] = str(python)
    if len(found) < 2:
        raise UsageError(
            f"--sdk-folder {folder}: {len(found)} usable SDK environment(s) (a venv whose bin/python has "
            "neuronx-cc); a bisection needs at least two: put one venv per SDK build in it"
        )
    unordered = [version for version in found if version_key(version) is None]
    if unordered:
        raise UsageError(
            f"--sdk-folder {folder}: neuronx-cc {unordered[0]} is not a version of numbers (as 2.24.5133.0), "
            "so its place in release order is unknown; take its venv out of the folder"
        )
    return sorted(found.items(), key=lambda item: version_key(item[0]) or ())


def compiler_of(python: Path) -> str | None:
    """The compiler the venv of `python` holds, as its rows will report it; None when it has none."""
    command = python.parent / "neuronx-cc"
    if os.access(command, os.X_OK):
        done = run_tool([str(command), "--version"], timeout_seconds=ASK_SECONDS)
        return parse_compiler_version(done.output) if done.returncode == 0 else None
    done = run_tool([str(python), "-I", "-c", _ASK], timeout_seconds=ASK_SECONDS)
    version = done.stdout.strip() if done.returncode == 0 else ""
    return version if version and version not in PLACEHOLDER_VERSIONS["neuronx-cc"] else None
