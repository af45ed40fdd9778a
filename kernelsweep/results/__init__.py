"""The results dataset: the pinned Arrow schema, row assembly, the Parquet writer and the reader.

`kernelsweep.results.read(uri, filters=...)` is the entry point for downstream users. Each name is
imported on first use (`kernelsweep.public_face`): building a row, as `kernelsweep bench` does, needs
none of pyarrow's datasets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.results.captures import StoredCapture
    from kernelsweep.results.columns import FAILED, INCORRECT, OK, SCHEMA_VERSION
    from kernelsweep.results.journal import Journal, begin, plan_resume, run_key
    from kernelsweep.results.outcome import RowSummary, SweepOutcome
    from kernelsweep.results.pairing import pair
    from kernelsweep.results.reader import dataset, find_row, read
    from kernelsweep.results.rows import PointRecord, Row, build_row
    from kernelsweep.results.verify import verify_row
    from kernelsweep.results.writer import write_results

__all__ = [
    "FAILED",
    "INCORRECT",
    "Journal",
    "OK",
    "PointRecord",
    "Row",
    "RowSummary",
    "SCHEMA_VERSION",
    "StoredCapture",
    "SweepOutcome",
    "begin",
    "build_row",
    "dataset",
    "find_row",
    "pair",
    "plan_resume",
    "read",
    "run_key",
    "verify_row",
    "write_results",
]
__getattr__ = public_face(__name__, __file__)
