"""The tuned store: the best configuration per kernel, shape, dtype, platform, LNC and SDK, kept beside
the results, written by searches and reports, and read at run time by `best` (plain Python: importing
this package loads neither Prefect nor pyarrow)."""

from kernelsweep.tuned.lookup import DEFAULTS, EXACT, NEAREST, OLDER_SDK, Table, Tuned, best, read_table

__all__ = ["DEFAULTS", "EXACT", "NEAREST", "OLDER_SDK", "Table", "Tuned", "best", "read_table"]
