"""The package's shape: one import root, and a core that never reaches up into Prefect or the flows."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "kernelsweep"
ORCHESTRATION = ("prefect", "kernelsweep.flows", "kernelsweep.tasks")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def offending(root: Path, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        bad = sorted(m for m in imported_modules(path) if m.split(".")[0] in forbidden or m.startswith(forbidden))
        if bad:
            found[str(path.relative_to(REPO))] = bad
    return found


def test_the_core_never_imports_prefect_or_the_orchestration_layers():
    assert offending(CORE, ORCHESTRATION) == {}


def test_the_adapters_never_import_the_simulator():
    """One production code path: the simulator plugs into the adapters, never the other way round."""
    assert offending(CORE / "toolchain", ("kernelsweep.sim",)) == {}


def test_a_function_level_import_is_seen_too(tmp_path):
    (tmp_path / "bad.py").write_text("def f():\n    from prefect.flows import flow\n    import kernelsweep.tasks\n")
    assert imported_modules(tmp_path / "bad.py") == {"prefect.flows", "kernelsweep.tasks"}


@pytest.mark.slow
def test_the_wheel_installs_exactly_one_top_level_package(tmp_path):
    """flows/ and tasks/ sit at the repository's top level but install as kernelsweep.flows / .tasks."""
    source = tmp_path / "source"  # setuptools leaves a build/ folder next to what it builds
    for part in ("kernelsweep", "flows", "tasks", "pyproject.toml", "README.md"):
        copy = shutil.copytree if (REPO / part).is_dir() else shutil.copy
        copy(REPO / part, source / part)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("kernelsweep-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        members = set(archive.namelist())
    assert {t for t in tops if not t.endswith(".dist-info")} == {"kernelsweep"}
    assert {"kernelsweep/flows/sweep.py", "kernelsweep/tasks/capture.py", "kernelsweep/flows/cli/app.py"} <= members


def test_the_nki_emulator_stands_below_the_simulated_tools():
    """sim/nki/ models the language; the stand-in tools (sim/*.py) use it, never the reverse."""
    below = ("__init__", "config")
    tools = tuple(f"kernelsweep.sim.{p.stem}" for p in (CORE / "sim").glob("*.py") if p.stem not in below)
    assert offending(CORE / "sim" / "nki", ("kernelsweep.toolchain", *tools)) == {}


def test_only_the_cli_reaches_the_doctor():
    """The doctor looks at everything below it; nothing in the core depends on what it concludes."""
    core = {p for p in CORE.rglob("*.py") if "doctor" not in p.relative_to(CORE).parts}
    assert [str(p.relative_to(REPO)) for p in sorted(core) if "kernelsweep.doctor" in str(imported_modules(p))] == []


def test_every_package_folder_is_installed():
    """A new subpackage missing from pyproject.toml's list works in this checkout and is absent from the wheel."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    mapped = {"kernelsweep.flows": REPO / "flows", "kernelsweep.tasks": REPO / "tasks"}
    found = {".".join(p.parent.relative_to(REPO).parts) for p in CORE.rglob("__init__.py")}
    for name, folder in mapped.items():
        for init in folder.rglob("__init__.py"):
            found.add(".".join((name, *init.parent.relative_to(folder).parts)))
    assert found == listed
