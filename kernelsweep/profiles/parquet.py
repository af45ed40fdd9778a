"""Read an Explorer Parquet profile folder in bounded memory: its Summary rows (every entry), and
the Metadata, SchemaFields and Warning tables beside them (schema reference: SDK
`tools/neuron-explorer/profile-schema-reference.rst`). Full JSON goes after SDK 2.33 (Explorer's
announcement), which leaves Parquet as the only full-profile output: this is that reader.

Only the first rows are decoded, after the footer shows that decoding them stays small; every
failure is a one-line ExtractError naming the file (kernelsweep.profiles.files' rules).
"""

from __future__ import annotations

from pathlib import Path

from kernelsweep.profiles.files import MAX_ENTRIES, MAX_FIELDS, MAX_METADATA_ROWS, MAX_TABLE_BYTES, RawProfile, fail

RESULTS_MARK = b"kernelsweep.schema_version"  # in every results file's footer (kernelsweep.results.writer)


def read_parquet(path: Path) -> RawProfile:
    """An Explorer output directory, or its Summary.parquet (or split `Summary_<i>.parquet` parts);
    Metadata, SchemaFields and Warning sit beside it."""
    parts = _summary_parts(path)
    rows = [row for part in parts for row in _parquet_rows(part, MAX_ENTRIES)]
    if not rows:
        raise fail(parts[0], "no summary record (Summary table has no rows)")
    if len(rows) > MAX_ENTRIES:  # split over several parts
        raise fail(parts[0], f"has more than {MAX_ENTRIES} summary entries; no profile does")
    beside = {name: parts[0].with_name(f"{name}.parquet") for name in ("Metadata", "SchemaFields", "Warning")}
    tables = {
        name: _parquet_rows(table, MAX_METADATA_ROWS) if table.exists() else None for name, table in beside.items()
    }
    metadata = _metadata_facts(tables["Metadata"]) if tables["Metadata"] is not None else None
    warnings = tuple(str(row.get("message")) for row in tables["Warning"] or [] if row.get("message"))
    return RawProfile(rows, metadata, tables["SchemaFields"], warnings)


def _summary_parts(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    if (path / "Summary.parquet").is_file():
        return [path / "Summary.parquet"]
    parts = sorted(path.glob("Summary_*.parquet"), key=lambda p: p.stem.removeprefix("Summary_").zfill(8))
    return parts or [path / "Summary.parquet"]


def _parquet_rows(path: Path, limit: int) -> list[dict[str, object]]:
    """The first `limit` rows, after checking from the footer that decoding them stays small."""
    import pyarrow  # deferred: only Parquet needs pyarrow, a heavy import for every other path
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
        meta = table.metadata
        if RESULTS_MARK in (meta.metadata or {}):
            raise fail(
                path,
                "is a kernelsweep results file, not a profile; use `kernelsweep report` or `kernelsweep lineage` "
                "on results, and extract on a capture's profile",
            )
        if meta.num_columns > MAX_FIELDS:
            raise fail(path, f"has {meta.num_columns} columns; a profile table has far fewer")
        first_group = meta.row_group(0).total_byte_size if meta.num_row_groups else 0
        if first_group > MAX_TABLE_BYTES:
            raise fail(path, f"holds {first_group} bytes in its first row group; a profile table is far smaller")
        if meta.num_rows > limit:
            raise fail(path, f"has {meta.num_rows} rows; a profile's {path.stem} table has far fewer")
        batch = next(table.iter_batches(batch_size=limit), None)
        return batch.to_pylist() if batch is not None else []
    except (OSError, pyarrow.ArrowException) as err:
        raise fail(path, f"cannot read Parquet table: {err}") from None


def _metadata_facts(rows: list[dict[str, object]]) -> dict[str, object]:
    """Metadata comes as key/value rows or as one wide row; key/value wins if both could apply."""
    if rows and {"key", "value"} <= rows[0].keys():
        return {str(row["key"]): row["value"] for row in rows}
    return rows[0] if rows else {}
