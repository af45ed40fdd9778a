"""`Results` read from the dataset a few columns at a time: a year of nights in bounded memory.

`Indexed` scans only the columns every row must show (the series, status, median, time, run and
lineage; `NARROW`), with the selection's filters pushed into the scan (partition pruning on
platform and run date, row-group statistics on the rest), text columns dictionary-encoded as they
arrive, and keeps, per row id, the row of the latest attempt (kernelsweep.report.index_table). Files
are scanned a lot at a time through fresh fragments: a scanned fragment keeps its file's whole
footer, which over a year of nights (2,000 files of 140 columns) was 800 MB on its own. Everything
a statistic needs over a whole series is computed from those columns; whole rows (raw repeats,
errors, rates) are read only for the row ids asked for, and only from the files that hold them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cached_property
from typing import overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from kernelsweep.errors import StoreError, UsageError
from kernelsweep.report.index_table import ORDER, SERIES, by_series, distinct, latest_of, with_variant, without_copies
from kernelsweep.report.load import (
    COLUMNS,
    LINEAGE,
    ReportRow,
    Selection,
    SeriesKey,
    typed,
)
from kernelsweep.report.series_query import SeriesRuns
from kernelsweep.results import reader

_TEXT = ["kernel", "shape", "dtype", "platform", "status", "flow_run_id", *LINEAGE, "tunables", "toolchain_name"]
NARROW = ["row_id", *_TEXT, "lnc", "latency_median_us", "total_time_us", "started_at", "run_date"]
_FRAGMENT = "__fragment"
_FILES_PER_SCAN = 64  # a lot's footers and batches are let go before the next: memory stays flat in files


class Indexed:
    """`kernelsweep.report.series_query.Results` over a results location and a selection."""

    def __init__(self, uri: str, selection: Selection | None = None) -> None:
        self.uri, self.selection = uri, selection or Selection()
        self._where = self.selection.expression()
        self._data = reader.dataset(uri, filters=self._where)
        self._fragments = list(self._data.get_fragments())
        table = self._scan()
        if table.num_rows == 0:
            raise UsageError(f"no results under {uri} ({self.selection.describe()}); check --results and the filters")
        self._table = by_series(with_variant(without_copies(table)))
        self._cache: dict[str, ReportRow] = {}

    def _scan(self) -> pa.Table:
        """The narrow columns of every selected row, each row tagged with the file it came from.

        A few files at a time, each lot made one table at once: a million rows kept as the files'
        small batches cost about twice their size in allocator overhead."""
        lots = []
        index = {fragment.path: i for i, fragment in enumerate(self._fragments)}
        for first in range(0, len(self._fragments), _FILES_PER_SCAN):
            lot = range(first, min(first + _FILES_PER_SCAN, len(self._fragments)))
            scanner = self._files(lot).scanner(columns=NARROW, filter=self._where, batch_size=1 << 16)
            try:
                batches = [_tagged(t.record_batch, index[t.fragment.path]) for t in scanner.scan_batches()]
            except OSError as exc:
                raise StoreError(f"reading results at {self.uri}: {exc}", retryable=True) from exc
            if batches:
                lots.append(pa.Table.from_batches(batches).unify_dictionaries().combine_chunks())
        if not lots:
            return pa.table({n: pa.array([], pa.string()) for n in NARROW})
        return pa.concat_tables(lots).unify_dictionaries()

    def batches(self, columns: list[str], where: ds.Expression | None = None) -> Iterator[pa.RecordBatch]:
        """Other columns of the selected rows (and `where`), a lot of files at a time through fresh
        fragments, as `_scan` reads the index: for whoever needs a few wide columns of many rows
        (the results site's intervals and artifact URIs) without holding every file's footer."""
        where = where & self._where if where is not None and self._where is not None else where or self._where
        for first in range(0, len(self._fragments), _FILES_PER_SCAN):
            lot = range(first, min(first + _FILES_PER_SCAN, len(self._fragments)))
            try:
                yield from self._files(lot).to_batches(columns=columns, filter=where, batch_size=1 << 14)
            except OSError as exc:
                raise StoreError(f"reading results at {self.uri}: {exc}", retryable=True) from exc

    @property
    def table(self) -> pa.Table:
        """The index: the narrow columns of every selected row, one per row id, sorted by series then time."""
        return self._table

    @property
    def groups(self) -> list[tuple[SeriesKey, int, int]]:
        """(series, first row, end) of each series in `table`, in series order."""
        return self._groups

    def _files(self, which: Iterable[int]) -> ds.FileSystemDataset:
        """Some of the files as a dataset of their own: a scanned fragment keeps its file's footer
        (hundreds of KB), so each scan gets fresh fragments that go when it is done."""
        made = [
            self._data.format.make_fragment(f.path, f.filesystem, partition_expression=f.partition_expression)
            for f in (self._fragments[i] for i in which)
        ]
        return ds.FileSystemDataset(made, self._data.schema, self._data.format, self._data.filesystem)

    def _column(self, name: str) -> np.ndarray:
        """A text column as dictionary indices (-1 for null), a number column as floats (NaN for null)."""
        column = self._table.column(name)
        if pa.types.is_dictionary(column.type):
            return column.combine_chunks().indices.fill_null(-1).to_numpy(zero_copy_only=False)
        if pa.types.is_integer(column.type):
            return column.to_numpy()
        return column.to_numpy(zero_copy_only=False).astype(float)

    def _dictionary(self, name: str) -> list[str | None]:
        return self._table.column(name).combine_chunks().dictionary.to_pylist()

    @cached_property
    def _groups(self) -> list[tuple[SeriesKey, int, int]]:
        """(series, first row, end) of each series, in series order (the table is sorted so)."""
        keys = np.stack([self._column(n) for n in SERIES], axis=1)
        starts = np.flatnonzero(np.r_[True, np.any(keys[1:] != keys[:-1], axis=1)])
        ends = np.r_[starts[1:], len(keys)]
        names = [self._dictionary(n) for n in SERIES]
        return [
            (_key(*(names[c][keys[s, c]] for c in range(len(SERIES)))), s, e)
            for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
        ]

    def latest(self) -> list[ReportRow]:
        return self.rows([self._row_id(end - 1) for _, _, end in self._groups])

    def _row_id(self, i: int) -> str:
        return str(self._table.column("row_id")[i].as_py())

    @cached_property
    def latency(self) -> np.ndarray:
        """Each row's latency in us: its repeats' median, else (older rows) its total time; NaN if none."""
        median, total = self._column("latency_median_us"), self._column("total_time_us")
        return np.where(np.isnan(median), total, median)

    def successful(self) -> dict[SeriesKey, np.ndarray]:
        """Per series (in series order), the rows of `table` of its successful runs, oldest first."""
        value = self.latency
        statuses = self._dictionary("status")
        ok_code = statuses.index("ok") if "ok" in statuses else -2
        ok = (self._column("status") == ok_code) & ~np.isnan(value) & (np.nan_to_num(value) > 0)
        return {key: start + np.flatnonzero(ok[start:end]) for key, start, end in self._groups}

    def series(self) -> dict[SeriesKey, SeriesRuns]:
        median = self._column("latency_median_us")
        lineage = distinct(self._table, list(LINEAGE))[1].ravel()
        levels = np.log(np.where(np.nan_to_num(self.latency) > 0, self.latency, 1.0))
        has_median = ~np.isnan(median) & (median != 0)
        ids = self._table.column("row_id")
        return {
            key: SeriesRuns(key, _Ids(ids, mine), levels[mine], lineage[mine], has_median[mine], self)
            for key, mine in self.successful().items()
        }

    def rows(self, row_ids: Sequence[str]) -> list[ReportRow]:
        missing = [i for i in dict.fromkeys(row_ids) if i not in self._cache]
        if missing:
            self._fetch(missing)
        return [self._cache[i] for i in row_ids]

    def _fetch(self, row_ids: list[str]) -> None:
        """Whole rows, read only from the files that hold them; per row id the latest attempt."""
        mask = pc.is_in(self._table.column("row_id"), value_set=pa.array(row_ids))
        files = np.unique(self._column(_FRAGMENT)[mask.to_numpy(zero_copy_only=False)])
        subset = self._files(files.tolist())
        where = ds.field("row_id").isin(row_ids)
        where = where & self._where if self._where is not None else where
        try:
            found = subset.to_table(filter=where, columns=COLUMNS)
        except OSError as exc:
            raise StoreError(f"reading results at {self.uri}: {exc}", retryable=True) from exc
        for batch in found.take(latest_of(found)).to_batches(max_chunksize=4096):  # not every dict at once
            for record in batch.to_pylist():
                self._cache[record["row_id"]] = ReportRow(**typed(record))

    def kernels(self) -> list[str]:
        return sorted({key[0] for key, _, _ in self._groups})

    def values(self, column: str) -> list[str]:
        present = np.unique(self._column(column))
        names = self._dictionary(column)
        return sorted(v for i in present.tolist() if i >= 0 and (v := names[i]))

    def runs_newest_first(self) -> list[str]:
        order = pc.sort_indices(self._table, sort_keys=ORDER).to_numpy()
        runs = self._column("flow_run_id")[order]
        codes, first = np.unique(runs, return_index=True)
        names = self._dictionary("flow_run_id")
        started = sorted(zip(first.tolist(), codes.tolist(), strict=True), reverse=True)
        return [str(names[code]) for _, code in started if code >= 0]

    def select(self, column: str, keep: Callable[[str | None], bool], newest: int | None = None) -> list[ReportRow]:
        names = self._dictionary(column)
        wanted = np.array([i for i, name in enumerate(names) if keep(name)] + ([-1] if keep(None) else []))
        chosen: list[int] = []
        codes = self._column(column)
        for _, start, end in self._groups:
            mine = start + np.flatnonzero(np.isin(codes[start:end], wanted))
            chosen += mine[::-1][:newest].tolist() if newest else mine[::-1].tolist()
        picked = sorted(chosen, key=lambda i: self._time_rank[i], reverse=True)
        return self.rows([self._row_id(i) for i in picked])

    @cached_property
    def _time_rank(self) -> np.ndarray:
        """Each row's place among all rows by when it was measured (ties: series order)."""
        order = pc.sort_indices(self._table, sort_keys=ORDER).to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank


class _Ids(Sequence[str]):
    """Row ids of some rows of the index, turned into text only when read."""

    def __init__(self, column: pa.ChunkedArray, rows: np.ndarray) -> None:
        self.column, self.rows = column, rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, item: int) -> str: ...

    @overload
    def __getitem__(self, item: slice) -> list[str]: ...

    def __getitem__(self, item: int | slice) -> str | list[str]:
        if isinstance(item, slice):
            return [str(v) for v in self.column.take(pa.array(self.rows[item], pa.int64())).to_pylist()]
        return str(self.column[int(self.rows[item])].as_py())

    def __iter__(self) -> Iterator[str]:
        return iter(self[:])


def _tagged(batch: pa.RecordBatch, fragment: int) -> pa.RecordBatch:
    """The batch's text columns dictionary-encoded, and the index of the file it came from."""
    arrays = [pc.dictionary_encode(batch[n]) if n in _TEXT else batch[n] for n in NARROW]
    where = pa.array(np.full(batch.num_rows, fragment, dtype=np.int32))
    return pa.RecordBatch.from_arrays([*arrays, where], names=[*NARROW, _FRAGMENT])


def _key(*names: str | None) -> SeriesKey:
    kernel, shape, dtype, platform, variant = (name or "" for name in names)
    return (kernel, shape, dtype, platform, variant)
