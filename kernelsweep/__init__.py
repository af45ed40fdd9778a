"""kernelsweep: performance sweeps of NKI kernels on AWS Trainium and Inferentia.

The core (this package, minus `kernelsweep.flows` and `kernelsweep.tasks`) is plain Python and never
imports Prefect: every stage runs and is tested without an orchestrator. `kernelsweep.tasks` wraps
each stage in a Prefect task and `kernelsweep.flows` chains them into flows and the CLI. Downstream
readers need only `kernelsweep.results.read`.

Each subpackage's `__init__` is its public face: `__all__` names what it offers to the rest of the
package and to users, imported (under `if TYPE_CHECKING:`, for readers and the type checker) from the
module that defines it. `public_face` imports a name's module only when the name is first used, so a
face costs nothing until then: a stand-in tool or a CLI command importing one module of a room does
not import the whole room (scientific-python's lazy_loader reads a stub file the same way).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def __getattr__(name: str) -> str:
    # Resolved on first use: importlib.metadata costs ~20 ms, paid otherwise by every simulated tool call.
    if name == "__version__":
        from importlib import metadata

        try:
            return metadata.version("kernelsweep")
        except metadata.PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'kernelsweep' has no attribute {name!r}")


def public_face(package: str, init_file: str) -> Callable[[str], Any]:
    """The `__getattr__` (PEP 562) of a subpackage whose face its `if TYPE_CHECKING:` imports declare:
    a name there is imported from its module on first use; any other name is no attribute."""
    doors: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if not doors:
            doors.update(declared_doors(init_file))
        if name not in doors:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(doors[name]), name)

    return __getattr__


def declared_doors(init_file: str) -> dict[str, str]:
    """name -> defining module, from the `from M import a, b` lines of an `if TYPE_CHECKING:` block."""
    import ast  # deferred: read once per face, on its first use

    with open(init_file, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename=init_file)
    doors: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for line in node.body:
                if isinstance(line, ast.ImportFrom) and line.module:
                    doors |= {alias.asname or alias.name: line.module for alias in line.names}
    return doors
