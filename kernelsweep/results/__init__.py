"""The results dataset: the pinned Arrow schema, row assembly, the Parquet writer and the reader.

`kernelsweep.results.read(uri, filters=...)` is the entry point for downstream users. The reader is
imported on first use (PEP 562): building a row, as `kernelsweep bench` does, needs none of pyarrow's
datasets.
"""

from __future__ import annotations

from typing import Any

__all__ = ["dataset", "find_row", "read"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kernelsweep.results import reader

        return getattr(reader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
