"""No import circles in the package as it installs: the core, kernelsweep.flows and kernelsweep.tasks.

A circle means neither module can be read, tested or moved without the other, and a deferred import
that hides one only postpones the failure to whichever module a caller happens to import first. Every
import counts: function-level, deferred and `if TYPE_CHECKING:` ones too, because each is a dependency
someone reading the code has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where each import root lives in the repository (flows/ and tasks/ install under kernelsweep, pyproject.toml)
ROOTS = {"kernelsweep": REPO / "kernelsweep", "kernelsweep.flows": REPO / "flows", "kernelsweep.tasks": REPO / "tasks"}


def package_modules(roots: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every module under the given import roots."""
    modules = {}
    for root, folder in roots.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((root, *parts))] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules one file imports: `from a.b import c` names a.b.c when that is a module, else a.b."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.add(f"{base}.{alias.name}")
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def import_graph(roots: dict[str, Path]) -> dict[str, set[str]]:
    modules = package_modules(roots)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_the_package_has_no_import_circle():
    assert circles(import_graph(ROOTS)) == []


def test_a_circle_through_a_deferred_or_type_checking_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.b import B\n")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import B\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "sub" / "c.py").write_text("def g():\n    import pkg.a\n")
    (pkg / "lone.py").write_text("import pkg.a\n")
    graph = import_graph({"pkg": pkg})
    assert graph["pkg.sub.b"] == {"pkg.sub.c"}
    assert circles(graph) == [["pkg.a", "pkg.sub", "pkg.sub.b", "pkg.sub.c"]]


def test_a_package_importing_its_own_modules_is_no_circle(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.one import ONE\nfrom pkg import two\n")
    (pkg / "one.py").write_text("ONE = 1\n")
    (pkg / "two.py").write_text("from pkg.one import ONE\n")
    assert circles(import_graph({"pkg": pkg})) == []
