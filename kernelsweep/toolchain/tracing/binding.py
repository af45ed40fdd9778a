"""A point's tunables bound into its kernel before tracing, so the compiler is handed tensors only.

neuronx-cc cannot take 0-d tensor inputs: AWS Labs' nki-autotune never passes a kernel's scalar
arguments to `compile_to_bir(inputs=...)`, but rewrites the kernel's source so that each scalar is a
local constant of the function and no longer a parameter, then loads the rewritten file as a module
(`inline_scalars` in autotune/src/autotune/runner/compile.py @ d57bcc3). kernelsweep does the same, on
every tracer generation and in the simulator, for one reason: the source is the one form every NKI
generation's tracer accepts. A parsing frontend (ParserFrontend, the legacy KLIR tracer, NKI before
0.7 or NKI_COMPILER_FRONTEND=custom) reads the function's source text, so a closure or a
functools.partial it cannot see through would either be refused or specialised without the values;
a tracing frontend (NKI 0.7) runs the function and accepts either. A rewritten file serves both,
and it is the form AWS Labs compiled on trn2 hosts.

The rewrite keeps every line where it was, so the compiler's `nki_source_location`s (hotspots, the
source heat map) still point into the user's file: the bound parameters leave the signature (padded
to the same lines), and the constants go on the body's first line, `tile_n = 256; ` before the first
statement. Only a body opening with a compound statement (`for`, `if`, ...) gets a line of its own,
which moves the lines below it by one. The file keeps the original's name, in its own folder.

Runs in the trace worker (Python 3.10+, no third-party imports) and in the simulator's tracer.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import io
import sys
import tokenize
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernelsweep.errors import TraceError

BOUND_FOLDER = "bound"  # in the point's work folder: the rewritten kernel module, kept out of the IR
SCALAR_TYPES = (bool, int, float, str)
# Statements that cannot follow `x = 1; ` on one line (ast.Match is 3.10's, ast.TryStar 3.11's)
_COMPOUND = tuple(
    getattr(ast, name)
    for name in ("If", "For", "While", "With", "Try", "TryStar", "Match", "FunctionDef", "ClassDef",
                 "AsyncFor", "AsyncWith", "AsyncFunctionDef")
    if hasattr(ast, name)
)  # fmt: skip


def specialise(source: str, function: str, constants: Mapping[str, Any]) -> str:
    """`source` with `function`'s parameters in `constants` turned into local constants (same lines)."""
    tree = ast.parse(source)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if node is None:
        raise TraceError(f"cannot bind tunables: no top-level function {function!r} in the kernel's source",
                         error_class="KernelSignature")  # fmt: skip
    arguments = node.args
    named = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    unknown = sorted(set(constants) - set(named))
    if unknown:
        raise TraceError(
            f"NKI kernel {function}({', '.join(named)}) takes no tunable {', '.join(unknown)}: "
            "a tunable must be one of the kernel's parameters",
            error_class="KernelSignature",
        )
    for name, value in constants.items():
        if not isinstance(value, SCALAR_TYPES):
            raise TraceError(f"tunable {name}={value!r} is not a number or a string", error_class="KernelSignature")
    lines = source.splitlines(keepends=True)
    _insert_constants(lines, node, constants)  # below the signature: its positions stay valid
    open_at, close_at = _parentheses(lines, node.lineno)
    _replace(lines, open_at, close_at, _without(arguments, set(constants)))
    return "".join(lines)


def _insert_constants(lines: list[str], node: ast.FunctionDef, constants: Mapping[str, Any]) -> None:
    first = node.body[0]
    assignments = "; ".join(f"{name} = {value!r}" for name, value in constants.items())
    row, line = first.lineno - 1, lines[first.lineno - 1]
    column = len(line.encode()[: first.col_offset].decode())  # ast counts UTF-8 bytes
    if isinstance(first, _COMPOUND):
        lines.insert(row, f"{line[:column]}{assignments}\n")
    else:
        lines[row] = f"{line[:column]}{assignments}; {line[column:]}"


def _parentheses(lines: list[str], def_line: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """((row, col) of the signature's `(`, (row, col) of its matching `)`), rows 0-based."""
    tokens = tokenize.generate_tokens(io.StringIO("".join(lines[def_line - 1 :])).readline)
    depth, opened = 0, None
    for token in tokens:
        if token.type != tokenize.OP or token.string not in "()":
            continue
        depth += 1 if token.string == "(" else -1
        here = (token.start[0] + def_line - 2, token.start[1])
        if token.string == "(" and opened is None:
            opened = here
        elif depth == 0 and opened is not None:
            return opened, here
    raise TraceError("cannot bind tunables: the kernel's signature does not parse", error_class="KernelSignature")


def _without(arguments: ast.arguments, bound: set[str]) -> str:
    """The parameter list without the bound parameters (their defaults gone with them)."""
    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    kept = [(a, d) for a, d in zip(positional, defaults, strict=True) if a.arg not in bound]
    keyword = [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if a.arg not in bound]
    only = sum(1 for a in arguments.posonlyargs if a.arg not in bound)
    trailing = [d for _, d in kept]
    first_default = next((i for i, d in enumerate(trailing) if d is not None), len(trailing))
    rebuilt = ast.arguments(
        posonlyargs=[a for a, _ in kept[:only]],
        args=[a for a, _ in kept[only:]],
        vararg=arguments.vararg,
        kwonlyargs=[a for a, _ in keyword],
        kw_defaults=[d for _, d in keyword],
        kwarg=arguments.kwarg,
        defaults=[d for d in trailing[first_default:] if d is not None],
    )
    return ast.unparse(rebuilt)


def _replace(lines: list[str], open_at: tuple[int, int], close_at: tuple[int, int], inner: str) -> None:
    """The text between the parentheses replaced by `inner`, padded with newlines to the same lines."""
    (first_row, first_col), (last_row, last_col) = open_at, close_at
    padding = "\n" * (last_row - first_row)
    merged = lines[first_row][: first_col + 1] + inner + padding + lines[last_row][last_col:]
    lines[first_row : last_row + 1] = merged.splitlines(keepends=True)


def bound_source(ref: str, tunables: Mapping[str, Any], folder: Path) -> tuple[Path, str]:
    """(the file to trace, the function in it): the kernel's own file without tunables, else the
    rewritten copy in `folder`, under the original file's name."""
    from kernelsweep.kernels import KernelSourceNotFound, nki_kernel_source

    try:
        path, function = nki_kernel_source(ref)
    except KernelSourceNotFound as exc:
        raise TraceError(f"{exc}; check the definition's nki_kernel", error_class="KernelImport") from None
    if not tunables:
        return path, function
    folder.mkdir(parents=True, exist_ok=True)
    bound = folder / path.name
    bound.write_text(specialise(path.read_text(), function, tunables))
    return bound, function


def bound_kernel(ref: str, tunables: Mapping[str, Any], folder: Path) -> Any:
    """The kernel object (its `@nki.jit` wrapper) with the tunables bound, imported from the rewritten
    file as a module of the original's package (so its relative imports still resolve)."""
    path, function = bound_source(ref, tunables, folder)
    module_name = ref.partition(":")[0]
    digest = hashlib.sha256(repr(sorted(tunables.items())).encode()).hexdigest()[:12]
    name = f"{module_name}__bound_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file we just wrote
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as nki-autotune's load_kernel: some SDK code looks the module up
    spec.loader.exec_module(module)
    return getattr(module, function)
