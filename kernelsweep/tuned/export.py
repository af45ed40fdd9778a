"""One file of every stored best, for a model's code or a kernel library to ship and load with
`kernelsweep.tuned.best(..., source=FILE)`: JSON, or TOML for a `.toml` name.

Beside the entries it carries each built-in kernel's default tunables, so a shape nothing near was
tuned for still gets a definite answer from the file alone. TOML has no null, so a TOML export leaves
out empty fields and seals each entry again over what it holds.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from kernelsweep.errors import UsageError
from kernelsweep.kernels import BUILTIN, load_kernel
from kernelsweep.tuned.keys import FORMAT_VERSION, seal


def document(entries: list[dict[str, Any]], source: str) -> dict[str, Any]:
    kernels = sorted({e["key"]["kernel"] for e in entries})
    defaults = {k: dict(load_kernel(BUILTIN[k]).tunable_defaults) for k in kernels if k in BUILTIN}
    return {
        "format_version": FORMAT_VERSION,
        "source": source,
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "defaults": {k: v for k, v in defaults.items() if v},
        "tuned": entries,
    }


def write(entries: list[dict[str, Any]], source: str, path: Path) -> int:
    """The file, whole or not at all; how many entries it holds. No entries is a usage error."""
    if not entries:
        raise UsageError(
            f"{source}: the tuned store is empty; run a search or `kernelsweep report --export-best` first"
        )
    doc = document(entries, source)
    if path.suffix == ".toml":
        doc["tuned"] = [seal(_no_nulls(e)) for e in entries]
        text = tomli_w.dumps(doc)
    else:
        text = json.dumps(doc, indent=1) + "\n"
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text)
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write it ({exc.strerror}); give a writable path") from None
    return len(entries)


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if k != "seal" and v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value if v is not None]
    return value
