"""Each subpackage's `__init__` is its public face: `__all__` names what it offers, every name there
exists, and a face imports a name's module only when the name is used (kernelsweep.public_face)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest
from test_import_circles import ROOTS, package_modules

from kernelsweep import declared_doors

PACKAGES = sorted(name for name, path in package_modules(ROOTS).items() if path.name == "__init__.py")


def test_every_subpackage_is_found():
    assert {"kernelsweep.report", "kernelsweep.results", "kernelsweep.flows.fleet", "kernelsweep.tasks"} <= set(
        PACKAGES
    )


@pytest.mark.parametrize("name", [p for p in PACKAGES if p != "kernelsweep"])
def test_each_face_names_what_it_offers_and_every_name_exists(name):
    package = importlib.import_module(name)
    offered = getattr(package, "__all__", None)
    assert offered is not None, f"{name}/__init__.py has no __all__"
    assert len(offered) == len(set(offered)), f"{name}.__all__ names one twice"
    submodules = {p.stem for p in Path(package.__file__).parent.glob("*.py")} | {
        p.parent.name for p in Path(package.__file__).parent.glob("*/__init__.py")
    }
    for attribute in offered:
        assert attribute not in submodules, (
            f"{name}.{attribute} is also a module's name: once imported, it hides the name"
        )
        value = getattr(package, attribute)  # a name the face offers but nothing defines fails here
        assert not isinstance(value, types.ModuleType), f"{name}.{attribute} is a module, not a name"
    doors = declared_doors(package.__file__)
    if doors:  # a lazy face: what its TYPE_CHECKING block imports is what __all__ names, no more, no less
        assert sorted(doors) == sorted(offered), name


def test_a_missing_name_is_an_attribute_error_naming_the_face():
    import kernelsweep.stores as stores

    with pytest.raises(AttributeError, match="module 'kernelsweep.stores' has no attribute 'nowhere'"):
        _ = stores.nowhere  # type: ignore[attr-defined]


def test_importing_one_module_of_a_room_does_not_import_its_face():
    """A stand-in tool, the fleet worker and each CLI command import the modules they need: a face that
    imported every module it names would make them pay for the whole room (pyarrow's datasets, matplotlib)."""
    code = (
        "import sys, kernelsweep.stores.locations, kernelsweep.report.stats, kernelsweep.results.columns;"
        "from kernelsweep.stores import Location;"
        "print(sorted(m for m in ('kernelsweep.stores.artifacts', 'kernelsweep.report.summary',"
        " 'kernelsweep.results.reader', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path.cwd())
    assert done.stdout.strip() == "[]"


def test_a_run_or_a_shards_flow_run_imports_no_dataset_reader_search_or_plotting():
    """`kernelsweep run` and every flow-run process of a sweep, fleet or compile shard import their flow's
    modules first: the fleet flow's dataset reads (pyarrow.dataset, pandas), the tunables search (Optuna,
    redis, SciPy) and matplotlib cost each about a CPU second more when they came with them (issues 39,
    40); the runs that use them import them."""
    heavy = ("pyarrow.dataset", "pandas", "optuna", "redis", "scipy", "matplotlib", "kernelsweep.flows.fleet.flow",
             "kernelsweep.flows.search")  # fmt: skip
    code = (
        "import sys, kernelsweep.flows.cli.run, kernelsweep.flows.embedded, kernelsweep.flows.sweep,"
        " kernelsweep.flows.fleet.shard, kernelsweep.flows.compile_shard;"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path.cwd())
    assert done.stdout.strip() == "[]"


def test_the_orchestration_layer_imports_what_a_door_offers_from_the_door():
    """flows/ and tasks/ import a room's public names through its `__init__`, so a room can move a name
    between its modules without touching them (the core's rooms import each other's modules: a door
    imported inside the core would close circles through the doors' own imports)."""
    modules = package_modules(ROOTS)
    doors = {name: declared_doors(str(path)) for name, path in modules.items() if path.name == "__init__.py"}
    offenders = []
    for name, path in modules.items():
        if not name.startswith(("kernelsweep.flows", "kernelsweep.tasks")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            room = node.module.rpartition(".")[0]
            offered = doors.get(room, {})
            inside = name == room or name.startswith(room + ".")
            if offered and not inside and all(offered.get(a.name) == node.module for a in node.names):
                offenders.append(f"{path.relative_to(ROOTS['kernelsweep'].parent)}:{node.lineno} from {room}")
    assert offenders == []
