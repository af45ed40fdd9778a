"""The simulator's traced IR: a `penguin.py` whose only content is a data literal.

A real legacy trace writes Python source that builds penguin IR; ours records what the simulated
compiler needs (kernel, parameters, tensors) and is read back with `ast.literal_eval`, never
executed.
"""

from __future__ import annotations

import json
from pathlib import Path

_HEADER = "# SIMULATED penguin IR written by the kernelsweep simulated toolchain; not a real trace.\n"


def render_ir(payload: dict) -> str:
    body = json.dumps(payload, sort_keys=True, indent=1)
    return f"{_HEADER}IS_SIMULATION = True\nKERNEL = {body}\n"


def write_ir(path: Path, payload: dict) -> None:
    path.write_text(render_ir(payload))


def read_ir(path: Path) -> dict:
    import ast  # only the legacy compile reads IR back; every trace only writes it

    text = Path(path).read_text()
    tree = ast.parse(text, filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KERNEL" for t in node.targets):
            source = ast.get_source_segment(text, node.value)
            if source is not None:
                return json.loads(source)
    raise ValueError(f"{path}: no KERNEL payload; not an IR file written by the simulated tracer")
