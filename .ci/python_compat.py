"""Does kernelsweep's own code suit this interpreter? Run by .ci/python-compat under each newer Python
the machine has (kernelsweep's venv and tests are 3.11's): every module of the package compiles here,
with SyntaxWarnings as errors (3.12 made invalid escapes a SyntaxWarning on the way to an error),
and no module imports a standard-library module this Python no longer has (3.12 removed distutils,
imp, asynchat, asyncore, smtpd; 3.13 the PEP 594 batch: cgi, crypt, telnetlib, ...).

    python3.X .ci/python_compat.py REFERENCE_STDLIB_FILE FOLDER...

REFERENCE_STDLIB_FILE holds the venv Python's `sys.stdlib_module_names`, one per line: a module in
it that this Python lacks was removed from the standard library. Prints one line per problem.
"""

import ast
import sys
import warnings
from pathlib import Path


def imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def main(reference_file: str, folders: list[str]) -> int:
    removed = set(Path(reference_file).read_text().split()) - set(sys.stdlib_module_names)
    problems, files = [], sorted(p for folder in folders for p in Path(folder).rglob("*.py"))
    for path in files:
        source = path.read_text()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", SyntaxWarning)
                compile(source, str(path), "exec", dont_inherit=True)
        except (SyntaxError, SyntaxWarning) as exc:
            problems.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        for name in sorted(imported(ast.parse(source)) & removed):
            problems.append(f"{path}: imports {name}, which Python {sys.version.split()[0]} no longer has")
    print("\n".join(problems) or f"Python {sys.version.split()[0]}: {len(files)} files compile, no removed imports")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
