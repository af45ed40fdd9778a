"""How many tests the slow stage has and how many assert statements they make: the count a change to the
stage must not lower (docs/testing.md). Read from the source, so it runs on any commit:

    python benchmarks/slow_asserts.py [REPO]

A test is slow when its function or its module's `pytestmark` carries `pytest.mark.slow`; parametrized
cases count once. Its asserts are the `assert` statements in its body, plus those of the module's other
functions (fixtures and helpers) when every test of the module is slow.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _marks_slow(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "slow" for n in ast.walk(node))


def _name(target: ast.expr) -> str:
    return target.id if isinstance(target, ast.Name) else ""


def _asserts(node: ast.AST) -> int:
    return sum(isinstance(n, ast.Assert) for n in ast.walk(node))


def count(tests: Path) -> tuple[int, int]:
    """(slow tests, their assert statements) under `tests`."""
    total_tests = total_asserts = 0
    for path in sorted(tests.glob("test_*.py")):
        module = ast.parse(path.read_text())
        module_slow = any(
            isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
            and _marks_slow(n)
            for n in module.body
        )
        functions = [n for n in module.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        tests_here = [f for f in functions if f.name.startswith("test_")]
        slow = [f for f in tests_here if module_slow or any(_marks_slow(d) for d in f.decorator_list)]
        total_tests += len(slow)
        total_asserts += sum(_asserts(f) for f in slow)
        if slow and len(slow) == len(tests_here):
            total_asserts += sum(_asserts(f) for f in functions if not f.name.startswith("test_"))
    return total_tests, total_asserts


if __name__ == "__main__":
    repo = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    tests, asserts = count(repo / "tests")
    print(f"slow stage: {tests} tests, {asserts} assert statements")
