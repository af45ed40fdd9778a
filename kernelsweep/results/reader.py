"""Read the results dataset (a folder or `s3://bucket/prefix`) with the unified schema.

pyarrow, like Polars, takes a dataset's schema from the first file it opens and silently drops
columns that only later files have. Reading through `dataset` avoids that: the schema is the pinned
BASE_SCHEMA plus every `param_*` column any selected file holds (int64), so files written before a
column existed read back with nulls there, and the hive partitions come back typed (`run_date` as a
date, not a string). Hidden files (`.incoming-*`, a crashed local write) are never read, and
neither is a Parquet file kernelsweep did not write (no `kernelsweep.schema_version` in its footer
and not the text columns that identify a row): it is skipped, with one warning naming it (and how
many more). A file that is not Parquet at all (a torn copy of a results file, say) is a StoreError
naming it: it may hold rows.

One row id can be in two objects: a flow run re-executed with different bytes keeps both
(`<id>.parquet`, `<id>.attempt-2.parquet`), and `kernelsweep compact` (kernelsweep.results.compact)
writes a partition's rows into one object before it deletes the small ones. `read` returns each row
id once: the row of the highest attempt, a compacted object counting below every attempt (anything
written after a compaction is newer than it). A reader in the middle of a compaction therefore sees
every row exactly once, before, during and after.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import fs

from kernelsweep.errors import StoreError, UsageError
from kernelsweep.results.schema import BASE_SCHEMA, PARAM_PREFIX
from kernelsweep.results.writer import LAYOUT_VERSION
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

PARTITIONS = pa.schema([("platform", pa.string()), ("run_date", pa.date32())])
FOOTER_READ_THREADS = 16
COMPACTED_PREFIX = "compact-"  # a partition's rows in one object (kernelsweep.results.compact)
_ATTEMPT = re.compile(r"\.attempt-(\d+)\.parquet$")
_FILENAME = "__filename"  # pyarrow's per-row source path, asked for by name
_MARK = b"kernelsweep.schema_version"  # in every results file's footer (kernelsweep.results.writer)
IDENTITY = ("row_id", "sweep", "kernel", "shape", "status", "flow_run_id")  # text columns every row has
log = logging.getLogger(__name__)

Filters: TypeAlias = ds.Expression | list | None


def dataset(uri: Location | str, *, filters: Filters = None) -> ds.Dataset:
    """The files under `uri` (pruned by any partition terms in `filters`) as one dataset.

    Hand it to DuckDB (`duckdb.sql("select ... from d")`) or scan it yourself; `read` is the
    one-call version.
    """
    filesystem, root = table_filesystem(uri)
    base = _with_partitions(BASE_SCHEMA)
    partitioning = ds.partitioning(PARTITIONS, flavor="hive")
    try:
        discovered = ds.dataset(root, schema=base, format="parquet", partitioning=partitioning, filesystem=filesystem)
        fragments = _fragments(discovered, _expression(filters))
    except FileNotFoundError:
        fragments = []
    except OSError as exc:
        raise StoreError(f"listing results at {uri}: {exc}", retryable=True) from exc
    with ThreadPoolExecutor(FOOTER_READ_THREADS) as pool:
        found = list(pool.map(_physical_schema, fragments))
    warn_foreign([(fragment.path, why) for fragment, (_, why) in zip(fragments, found, strict=True) if why])
    fragments = [fragment for fragment, (_, why) in zip(fragments, found, strict=True) if not why]
    schemas = [schema for schema, why in found if not why and schema is not None]
    params = dict.fromkeys(n for schema in schemas for n in schema.names if n.startswith(PARAM_PREFIX))
    unified = BASE_SCHEMA
    for name in params:
        unified = unified.append(pa.field(name, pa.int64()))
    return ds.FileSystemDataset(fragments, _with_partitions(unified), ds.ParquetFileFormat(), filesystem)


def read(
    uri: Location | str, *, filters: Filters = None, columns: list[str] | None = None, every_copy: bool = False
) -> pa.Table:
    """Rows under `uri` as one table, each row id once (see the module's docstring; `every_copy`
    keeps every object's copy); `filters` is a pyarrow expression or pyarrow's DNF tuples,
    e.g. `[("platform", "=", "trn2"), ("run_date", ">=", date(2026, 1, 1))]`."""
    data = dataset(uri, filters=filters)
    names = columns if columns is not None else data.schema.names
    scanned = names if every_copy else list(dict.fromkeys([*names, "row_id", _FILENAME]))
    try:
        table = data.to_table(filter=_expression(filters), columns=scanned)
    except OSError as exc:
        raise StoreError(f"reading results at {uri}: {exc}", retryable=True) from exc
    return table if every_copy else _one_per_row_id(table).select(names)


def _one_per_row_id(table: pa.Table) -> pa.Table:
    """Per row id, the row of the object that ranks highest (`rank`)."""
    if table.num_rows == 0 or pc.count_distinct(table["row_id"]).as_py() == table.num_rows:
        return table
    files = table[_FILENAME].to_pylist()
    ranked = table.append_column("__rank", pa.array([rank(f) for f in files], pa.int64()))
    ordered = ranked.take(pc.sort_indices(ranked, [("row_id", "ascending"), ("__rank", "descending")]))
    ids = ordered["row_id"]
    first = pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))
    keep = pa.concat_arrays([pa.array([True]), first.combine_chunks()])
    return ordered.filter(keep).drop_columns(["__rank"])


def find_row(uri: Location | str, row_id: str, *, filters: Filters = None) -> dict | None:
    """One row by id (narrow the scan with partition `filters` when known).

    A run re-executed with different results keeps each attempt's object under the same row ids;
    the latest attempt's row is returned.
    """
    data = dataset(uri, filters=filters)
    where = ds.field("row_id") == row_id
    if (narrow := _expression(filters)) is not None:
        where = where & narrow
    found: list[tuple[int, dict]] = []
    for tagged in data.scanner(filter=where).scan_batches():
        found += [(rank(tagged.fragment.path), row) for row in tagged.record_batch.to_pylist()]
    return max(found, key=lambda pair: pair[0])[1] if found else None


def _fragments(discovered: ds.Dataset, where: ds.Expression | None) -> list[ds.Fragment]:
    """Partition pruning before any footer is read; a filter on a `param_*` column (unknown until the
    footers are read) cannot prune here and is applied in full by the scan instead."""
    try:
        return list(discovered.get_fragments(filter=where))
    except pa.ArrowInvalid:
        return list(discovered.get_fragments())


def _physical_schema(fragment: ds.FileFragment) -> tuple[pa.Schema | None, str]:
    """(the file's schema, "") or (None, why it is not a kernelsweep results file).

    Read apart from the fragment: `fragment.physical_schema` keeps the file's whole footer in the
    fragment (about 400 KB for a 140-column file), which over a year of nights is most of a report's
    memory; the scan reads the footer again and lets it go with the fragment.
    """
    try:
        schema = pq.read_schema(fragment.path, filesystem=fragment.filesystem)
    except (OSError, pa.ArrowInvalid) as exc:  # a torn copy of a results file: a problem of the store
        raise StoreError(f"{fragment.path} is not a readable Parquet file ({exc}); move it out of the dataset") from exc
    why = foreign(schema)
    return (None, why) if why else (schema, "")


def warn_foreign(foreign: list[tuple[str, str]]) -> None:
    """One warning for every Parquet file kernelsweep did not write: the first by name, how many more."""
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        log.warning("skipped %s%s: %s; move it out of the results", foreign[0][0], more, foreign[0][1])


def foreign(schema: pa.Schema) -> str:
    """Why a file of this schema is not a kernelsweep results file, or "" when it is one."""
    if _MARK in (schema.metadata or {}):
        return ""
    identity = [schema.field(n).type if n in schema.names else None for n in IDENTITY]
    if all(t is not None and pa.types.is_string(t) for t in identity):  # written before the mark, or by hand
        return ""
    return "a Parquet file kernelsweep did not write (no kernelsweep.schema_version, no row identity)"


def writer_version(schema: pa.Schema) -> int:
    """The schema version a results file's writer stamped in its footer (0 when none or unreadable)."""
    mark = (schema.metadata or {}).get(_MARK, b"")
    return int(mark) if mark.isdigit() else 0


def rank(path: str) -> int:
    """Which copy of a row wins: a run's attempt number (1 for `<id>.parquet`), 0 for a compacted object."""
    if path.rsplit("/", 1)[-1].startswith(COMPACTED_PREFIX):
        return 0
    match = _ATTEMPT.search(path)
    return int(match.group(1)) if match else 1


def _with_partitions(schema: pa.Schema) -> pa.Schema:
    """`platform` is both a column and a partition (same values); `run_date` exists only in the path."""
    return schema.append(PARTITIONS.field("run_date"))


def _expression(filters: Filters) -> ds.Expression | None:
    if filters is None or isinstance(filters, ds.Expression):
        return filters
    try:
        return pq.filters_to_expression(filters)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"filters {filters!r}: use a pyarrow expression or [(column, op, value), ...]") from exc


def table_filesystem(results: Location | str) -> tuple[fs.FileSystem, str]:
    """The filesystem the dataset is on and the path of its `v1/` table in it."""
    where = parse_location(results, "results location")
    if isinstance(where, s3.S3Location):
        try:
            filesystem = s3.pyarrow_filesystem(where)  # resolves the bucket's region: a network call
        except OSError as exc:
            raise StoreError(f"cannot reach results at {where}: {' '.join(str(exc).split())}") from exc
        return filesystem, f"{where.bucket}/{where.key(LAYOUT_VERSION)}"
    if not where.path.is_dir():
        raise UsageError(f"results folder {str(where)!r} does not exist; pass the folder the sweep wrote to")
    return fs.LocalFileSystem(), str(where.path.resolve() / LAYOUT_VERSION)
