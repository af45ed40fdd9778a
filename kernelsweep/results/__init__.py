"""The results dataset: the pinned Arrow schema, row assembly, the Parquet writer and the reader.

`kernelsweep.results.read(uri, filters=...)` is the entry point for downstream users.
"""

from kernelsweep.results.reader import dataset, find_row, read

__all__ = ["dataset", "find_row", "read"]
