"""Pydantic's validation errors as the one line a user reads, naming the field as the file wrote it.

Both the model's own validation (a run from the UI form) and loading a file (kernelsweep.sweepspec.load)
answer with this line, so the two read alike.
"""

from __future__ import annotations

from pydantic import ValidationError

from kernelsweep.dtypes import DTYPE_NAMES
from kernelsweep.platforms import PLATFORM_NAMES

ONE_LINE_ERROR = "invalid_spec"  # pydantic error type carrying the finished one-line message


def first_error(exc: ValidationError, data: object = None) -> str:
    """The first of pydantic's errors as the one line a user reads: where, what was given, what to write."""
    err = exc.errors()[0]
    if err["type"] == ONE_LINE_ERROR:
        return err["msg"]
    where = _where(err["loc"], data) or "top level"
    if err["type"] == "extra_forbidden":
        return f"unknown key {where!r}; remove it or check its spelling"
    if err["type"] == "missing":
        return f"missing required key {where!r}; add it"
    if err["type"] == "literal_error" and err["loc"] and err["loc"][0] == "platforms":
        return f"unknown platform {err['input']!r} at {where}; use one of {', '.join(PLATFORM_NAMES)}"
    if err["type"] == "literal_error" and "dtypes" in err["loc"]:
        return f"unknown dtype {err['input']!r} at {where}; use one of {', '.join(DTYPE_NAMES)}"
    if err["type"] in _WANTED:
        given = _GIVEN.get(type(err["input"]), type(err["input"]).__name__)
        return f"{where} is {err['input']!r} ({given}); give {_WANTED[err['type']]}"
    message = err["msg"].removeprefix("Value error, ")
    return f"{where}: {message}"


def _where(loc: tuple[int | str, ...], data: object) -> str:
    """`kernels[0].grid.n[0]` for pydantic's ("kernels", 0, "grid", 0, "values", 0): an axis written as a
    table (`grid = { n = [...] }`) is named as written, not by the list the model turns it into."""
    text, node, as_table = "", data, False
    for part in loc:
        if isinstance(part, int) and isinstance(node, dict) and 0 <= part < len(node):
            name = list(node)[part]
            text, node, as_table = f"{text}.{name}", node[name], True
        elif isinstance(part, int):
            text, node = f"{text}[{part}]", node[part] if isinstance(node, list) and part < len(node) else None
        elif part == "values" and as_table:
            as_table = False
        elif node is not None and not isinstance(node, (dict, list)):
            continue  # a union's member (`int` of int | str): the value is already named
        else:
            text, node = f"{text}.{part}", node.get(part) if isinstance(node, dict) else None
    return text.lstrip(".")


_GIVEN = {str: "text", bool: "a boolean", float: "a decimal number", int: "a whole number"}
_WANTED = {  # strict types: what to write instead of a quoted number or a boolean
    "int_type": "a whole number, without quotes",
    "float_type": "a number, without quotes",
    "bool_type": "true or false, without quotes",
    "string_type": "text, in quotes",
}
