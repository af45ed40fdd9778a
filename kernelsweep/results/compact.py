"""`kernelsweep compact`: rewrite each partition's small objects as one, losing, duplicating and half-showing nothing.

Every shard writes one object per platform, and each object carries ~48 KB of Parquet metadata
(docs/fleet.md, "Storage over time"): a month of nights is hundreds of mostly-metadata objects that
every report lists and opens. Compaction makes one object of each partition
(`v1/platform=<p>/run_date=<d>/`), in this order:

1. read every object of the partition (every copy of every row);
2. keep one row per row id: the copy `reader.rank` prefers (a run's highest attempt; an earlier
   compacted object ranks lowest), so the rows are those a reader already saw, row ids unchanged;
3. write them as one object named after its bytes (`compact-<sha256>.parquet`), created only where
   absent (kernelsweep.results.writer: a hard link of a complete hidden file, `If-None-Match: *` on S3);
4. only then delete the objects it was made from.

Stopped anywhere (a kill, a lost connection), a partition holds its old objects, or the compacted
one beside some of them: `reader.read` returns each row id once either way, so a reader never sees a
half state. Running it again is safe and finishes the job: the rows are the same, so the bytes and
the name are the same (`exists-identical`), and the deletes are repeated. A partition that is one
object already is left alone.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from kernelsweep.errors import StoreError
from kernelsweep.results import reader
from kernelsweep.results.schema import PARAM_PREFIX, SCHEMA_VERSION, schema_for
from kernelsweep.results.writer import LAYOUT_VERSION, ResultTarget, open_target, parquet_bytes
from kernelsweep.stores.locations import Location

SORT = [("kernel", "ascending"), ("shape", "ascending"), ("dtype", "ascending"), ("row_id", "ascending")]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Partition:
    platform: str
    run_date: date
    objects: list[str]  # paths on the dataset's filesystem

    @property
    def key(self) -> str:
        return f"{LAYOUT_VERSION}/platform={self.platform}/run_date={self.run_date.isoformat()}"


@dataclass(frozen=True)
class Compacted:
    partition: str  # `v1/platform=.../run_date=...`
    replaced: int  # objects deleted
    rows: int
    uri: str  # the one object the partition is now


def partitions(results: Location | str, *, before: date | None = None) -> list[Partition]:
    """Every partition with more than one object (dated before `before`, when given), oldest first."""
    filesystem, root = reader.table_filesystem(results)
    try:
        infos = filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise StoreError(f"listing results at {results}: {exc}", retryable=True) from exc
    found: dict[tuple[str, date], list[str]] = {}
    for info in infos:
        parts = info.path[len(root) :].strip("/").split("/")
        if info.type != fs.FileType.File or len(parts) != 3 or parts[2].startswith((".", "_")):
            continue
        platform, day = parts[0].removeprefix("platform="), parts[1].removeprefix("run_date=")
        try:
            run_date = date.fromisoformat(day)
        except ValueError:
            continue
        if before is None or run_date < before:
            found.setdefault((platform, run_date), []).append(info.path)
    groups = [Partition(p, d, sorted(paths)) for (p, d), paths in found.items() if len(paths) > 1]
    return sorted(groups, key=lambda g: (g.run_date, g.platform))


def compact(results: Location | str, *, before: date | None = None) -> list[Compacted]:
    """Compact every partition of `results` that has several objects; what was done, per partition."""
    filesystem, _ = reader.table_filesystem(results)
    target = open_target(results)
    done = [compact_partition(filesystem, target, group) for group in partitions(results, before=before)]
    return [part for part in done if part is not None]


def compact_partition(filesystem: fs.FileSystem, target: ResultTarget, group: Partition) -> Compacted | None:
    """The partition's kernelsweep objects as one (None when it has fewer than two); a Parquet object
    kernelsweep did not write is skipped with one warning, as a reader does, and stays where it is."""
    tables, paths, foreign = [], [], []
    for path in group.objects:
        table = _read(filesystem, path)
        if why := reader.foreign(table.schema):
            foreign.append((path, why))
        else:
            tables.append(table)
            paths.append(path)
    reader.warn_foreign(foreign)
    if len(tables) < 2:
        return None
    try:
        table = merged(tables, paths)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise StoreError(f"the objects of {group.key} cannot be merged ({exc}); leaving them as they are") from exc
    version = max([SCHEMA_VERSION, *(reader.writer_version(t.schema) for t in tables)])
    data = parquet_bytes(table.replace_schema_metadata(_metadata(group, table.num_rows, version)))
    sha = hashlib.sha256(data).hexdigest()
    name = f"{reader.COMPACTED_PREFIX}{sha[:32]}.parquet"
    if target.create(f"{group.key}/{name}", data, sha) == "exists-different":  # a name made of its bytes
        raise StoreError(f"{target.uri(f'{group.key}/{name}')} exists with other bytes; leaving {group.key} as it is")
    written = f"{paths[0].rsplit('/', 1)[0]}/{name}"
    sources = [path for path in paths if path != written]
    _verify(filesystem, written, table, dict(zip(paths, tables, strict=True)))
    _delete(filesystem, sources)
    log.info("compacted %d objects of %s into %s (%d rows)", len(sources), group.key, written, table.num_rows)
    return Compacted(group.key, len(sources), table.num_rows, target.uri(f"{group.key}/{name}"))


def _verify(filesystem: fs.FileSystem, written: str, table: pa.Table, sources: dict[str, pa.Table]) -> None:
    """Before any original goes: the object as stored reads back as the merged rows, and holds every row
    id and every column of every original (StoreError, originals kept, when it does not)."""
    stored = _read(filesystem, written)
    if not stored.equals(table):
        raise StoreError(f"{written} does not read back as the rows compacted into it; the originals are kept")
    ids = set(stored.column("row_id").to_pylist())
    for path, source in sources.items():
        if not set(source.schema.names) <= set(stored.schema.names) or not set(source["row_id"].to_pylist()) <= ids:
            raise StoreError(f"{written} lacks rows or columns of {path}; the originals are kept")


def merged(tables: list[pa.Table], paths: list[str]) -> pa.Table:
    """One table of every row id once (the copy `reader.rank` prefers), in the writer's row order, with
    every column any object has (`_schema`)."""
    schema = _schema(tables)
    best: dict[str, tuple[int, int, int]] = {}  # row id -> (rank, table, row)
    for index, (table, path) in enumerate(zip(tables, paths, strict=True)):
        rank = reader.rank(path)
        for row, row_id in enumerate(table.column("row_id").to_pylist()):
            if row_id not in best or rank > best[row_id][0]:
                best[row_id] = (rank, index, row)
    keep: dict[int, list[int]] = {}
    for _, index, row in best.values():
        keep.setdefault(index, []).append(row)
    parts = [_conform(tables[index].take(sorted(rows)), schema) for index, rows in sorted(keep.items())]
    return pa.concat_tables(parts).sort_by(SORT)


def _schema(tables: list[pa.Table]) -> pa.Schema:
    """This writer's columns, then any other column an object has (a newer writer's: never dropped), each
    of the type its newest writer gave it (the schema version in the object's footer; this writer's
    version for its own columns, winning a tie)."""
    axes = dict.fromkeys(
        n.removeprefix(PARAM_PREFIX) for t in tables for n in t.schema.names if n.startswith(PARAM_PREFIX)
    )
    ours = schema_for(list(axes))
    newest: dict[str, tuple[int, pa.DataType]] = {f.name: (SCHEMA_VERSION, f.type) for f in ours}
    for table in tables:
        version = reader.writer_version(table.schema)
        for f in table.schema:
            if f.name not in newest or version > newest[f.name][0]:
                newest[f.name] = (version, f.type)
    return pa.schema([pa.field(name, kind) for name, (_, kind) in newest.items()])


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` in `schema`'s columns and order: a column an older object lacks is null."""
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.schema.names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _read(filesystem: fs.FileSystem, path: str) -> pa.Table:
    try:
        return pq.read_table(path, filesystem=filesystem, partitioning=None)
    except (OSError, pa.ArrowInvalid) as exc:
        raise StoreError(f"{path} is not a readable Parquet file ({exc}); move it out of the dataset") from exc


def _delete(filesystem: fs.FileSystem, paths: Iterable[str]) -> None:
    for path in paths:
        try:
            filesystem.delete_file(path)
        except FileNotFoundError:
            pass  # deleted by a compaction that ran at the same time
        except OSError as exc:
            raise StoreError(f"deleting {path} after compacting it: {exc}; run the compaction again") from exc


def _metadata(group: Partition, rows: int, version: int) -> dict[bytes, bytes]:
    """No names or times: the same rows must make the same bytes (so a repeated compaction is idempotent).
    The version is the newest writer's whose types the object keeps, so a later compaction keeps them too."""
    lineage = f'{{"compacted": "{group.key}", "points": {rows}}}'
    return {b"kernelsweep.schema_version": str(version).encode(), b"kernelsweep.lineage": lineage.encode()}
