"""What the index does not hold and a kernel page needs: each point's interval of its median (from
its raw repeats) and its lineage (the artifacts it made, its run, its tools).

One scan per kernel being rebuilt, a lot of files at a time (Indexed.batches): the repeats are
turned into two numbers per batch and let go, and only the lineage columns are kept until the
kernel's series are written. Rows are matched to the index by row id and start time, so a
re-executed row's older attempt is never shown.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from kernelsweep.report.index import Indexed
from kernelsweep.report.ranks import order_ranks
from kernelsweep.report.summary import MEDIAN_CONFIDENCE
from kernelsweep.site.model import KernelData

URIS = ("kernel_source_uri", "ir_uri", "neff_uri", "ntff_uri", "profile_uri")
TOOLS = ("compiler_version", "runtime_version", "profiler_version", "nki_version", "instance_type", "host")
CHUNK_ROWS = 1 << 17
LINEAGE = ("row_id", "flow_run_id", "run_date", "status", "is_simulation", *URIS, *TOOLS)


def intervals(latencies: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's interval of its median from its repeats (NaN without repeats), rows of one count at once."""
    lengths = pc.list_value_length(latencies).fill_null(0).to_numpy(zero_copy_only=False)
    low, high = np.full(len(lengths), np.nan), np.full(len(lengths), np.nan)
    flat = pc.list_flatten(latencies).to_numpy(zero_copy_only=False).astype(float)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    for n in np.unique(lengths[lengths > 0]).tolist():
        rows = np.flatnonzero(lengths == n)
        values = np.sort(flat[starts[rows, None] + np.arange(n)], axis=1)
        j, k = order_ranks(n, MEDIAN_CONFIDENCE)
        low[rows], high[rows] = values[:, j], values[:, k]
    return low, high


class Details:
    """The intervals of every index row scanned (NaN elsewhere) and each scanned kernel's lineage."""

    def __init__(self, results: Indexed) -> None:
        self.results = results
        self.low = np.full(results.table.num_rows, np.nan)
        self.high = np.full(results.table.num_rows, np.nan)

    def scan(self, data: KernelData) -> Iterator[tuple[int, dict[str, dict[str, list]]]]:
        """Reads the kernel's rows; fills their intervals, then yields (series number, each point's lineage)."""
        table = self.results.table
        positions = np.concatenate([s.rows for s in data.series]) if data.series else np.empty(0, np.int64)
        ids = table.column("row_id").take(pa.array(positions, pa.int64())).combine_chunks()
        started = _started(table.column("started_at").take(pa.array(positions, pa.int64())))
        found = np.full(len(positions), -1, dtype=np.int64)  # each position's row among the lineage kept
        kept: list[pa.Table] = []
        count = 0
        if not len(positions):  # a kernel that never ran successfully: no point to read
            yield from ((number, {}) for number in range(len(data.series)))
            return
        wanted = ["latencies_us", "started_at", *LINEAGE, "inputs"]
        for chunk in _chunks(self.results.batches(wanted, ds.field("kernel") == data.kernel)):
            at = pc.index_in(chunk.column("row_id"), value_set=ids).fill_null(-1).to_numpy(zero_copy_only=False)
            mine = (at >= 0) & (_started(chunk.column("started_at")) == started[np.maximum(at, 0)])
            if not mine.any():
                continue
            chosen = chunk.filter(pa.array(mine))
            low, high = intervals(chosen.column("latencies_us").combine_chunks())
            self.low[positions[at[mine]]], self.high[positions[at[mine]]] = low, high
            found[at[mine]] = count + np.arange(int(mine.sum()))
            count += int(mine.sum())
            kept.append(chosen.select([*LINEAGE, "inputs"]))
        lineage = pa.concat_tables(kept) if kept else None
        first = 0
        for number, s in enumerate(data.series):
            mine = found[first : first + len(s.rows)]
            first += len(s.rows)
            yield number, _records(lineage, mine)


def _chunks(batches: Iterator[pa.RecordBatch], rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """The batches as tables of about `rows` rows: each is matched to the index with one hash of its
    row ids (a file's batch at a time hashed the kernel's ids once per file: minutes at 10^6 rows)."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= rows:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _records(lineage: pa.Table | None, rows: np.ndarray) -> dict[str, dict[str, list]]:
    """A series' points' lineage as columns, each its distinct values and each point's code (-1: none):
    a thousand nights share a few tool versions and hosts, so the file is about its URIs and row ids."""
    if lineage is None:
        return {}
    where = pa.array(np.maximum(rows, 0), pa.int64(), mask=rows < 0)  # a point whose row was not read: null
    taken = lineage.take(where)
    out: dict[str, dict[str, list]] = {}
    for name in taken.column_names:
        column = taken.column(name).combine_chunks()
        if name == "inputs":
            listed = [[{"name": i["name"], "uri": i["uri"]} for i in v or []] for v in column.to_pylist()]
            out[name] = {"values": listed, "codes": [i if v else -1 for i, v in enumerate(listed)]}
            continue
        if name == "run_date":
            column = pc.cast(column, pa.string())
        encoded = pc.dictionary_encode(column)
        codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).tolist()
        out[name] = {"values": encoded.dictionary.to_pylist(), "codes": codes}
    return out


def _started(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Start times as integers in the schema's unit (-1 for none): the index's and a scan's compare exactly."""
    return pc.cast(column, pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
