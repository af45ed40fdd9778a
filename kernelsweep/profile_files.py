"""Read the summary record out of a profile file, in bounded memory and time whatever the file holds.

`neuron-profile view` / `neuron-explorer view` write the summary in three containers: full JSON
(every table; ~1 GB per 250k instructions, `summary` first or after the instruction table),
summary-json (a few KB) and Explorer Parquet (`Summary.parquet` + `Metadata.parquet`). A reader
here returns the first summary record as the profiler wrote it; kernelsweep.metrics normalises it.

`kernelsweep extract` takes any file a user names, so every reader is bounded by construction, not
by trust in the file:

* JSON is read as a stream of parse events (ijson's C parser, without the path prefixes that grow
  with depth: ijson's `items` needed gigabytes for a 500 KB file nested 100k deep) and only the
  summary record is built, so memory stays flat in file size and time linear in it;
* one enormous JSON value is refused as the file streams: each chunk read is checked (at C speed)
  for a string boundary, and runs without one past MAX_VALUE_BYTES (escaped quotes or digits only)
  or MAX_STRINGLESS_BYTES (no quote at all) stop the read. ijson's parser slows quadratically on one
  huge token: 16 MiB took 0.6 s, 300 MiB almost five minutes;
* nesting deeper than MAX_DEPTH is refused, anywhere in the file;
* a summary record is at most MAX_FIELDS values and its texts at most MAX_TEXT_CHARS;
* Parquet: only the first row of the Summary table is decoded, and tables beyond MAX_TABLE_BYTES
  are refused.
Every failure is a one-line ExtractError naming the file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import ijson

from kernelsweep.errors import ExtractError

MAX_VALUE_BYTES = 1 << 20  # a run of chunks inside one string (escaped quotes only) or one number
MAX_STRINGLESS_BYTES = 8 << 20  # a run of chunks without any quote: huge text, or a layout no profile has
MAX_DEPTH = 64
MAX_FIELDS = 4096
MAX_TEXT_CHARS = 64 << 10
MAX_TABLE_BYTES = 64 << 20
MAX_METADATA_ROWS = 10_000
_OPEN = ("start_map", "start_array")
_CLOSE = ("end_map", "end_array")
_NUMBER_BYTES = b"0123456789+-.eE"

Record = Mapping[str, object]
Events = Iterator[tuple[str, Any]]


def fail(path: Path, problem: object) -> ExtractError:
    """One-line message: parser errors (ijson, pyarrow) span several lines."""
    return ExtractError(f"{path}: {' '.join(str(problem).split())}")


class _Refused(Exception):
    """A bound was crossed; raised from inside the parser's read and turned into ExtractError."""


class _Metered:
    """The parser's file. Each chunk is checked as it is read, with bytes methods (no per-event cost):
    inside one string every quote is escaped, inside one number there are only number characters,
    so a long enough run of such chunks is one enormous value."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.last = handle, b""
        self.stringless = self.escaped = self.digits = 0

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        if data:
            quotes = data.count(b'"')
            # Each `\"` of last byte + chunk has its quote in the chunk (a `\` ending the last one escapes one).
            unescaped = quotes > (self.last + data).count(b'\\"')
            self.stringless = 0 if unescaped else self.stringless + len(data)
            self.escaped = 0 if unescaped or not quotes else self.escaped + len(data)
            self.digits = 0 if data.translate(None, _NUMBER_BYTES) else self.digits + len(data)
            self.last = data[-1:]
            if max(self.escaped, self.digits) > MAX_VALUE_BYTES:
                raise _Refused(f"holds a single value over {MAX_VALUE_BYTES >> 20} MiB; no profile does")
            if self.stringless > MAX_STRINGLESS_BYTES:
                raise _Refused(
                    f"runs {MAX_STRINGLESS_BYTES >> 20} MiB without a string: one huge value, or no profile layout"
                )
        return data


@contextmanager
def _errors(path: Path) -> Iterator[None]:
    """I/O, syntax and bound errors from any reader as a one-line ExtractError naming the file."""
    try:
        yield
    except _Refused as err:
        raise fail(path, err) from None
    except OSError as err:
        raise fail(path, f"cannot read profile: {err.strerror or err}") from None
    except (ijson.JSONError, ValueError) as err:  # ValueError: UnicodeDecodeError and the like
        raise fail(path, f"not valid JSON: {err}") from None
    except MemoryError:
        raise fail(path, "too large to read") from None


def _events(handle: BinaryIO) -> Events:
    return ijson.basic_parse(_Metered(handle), use_float=True)


def _too_deep() -> _Refused:
    return _Refused(f"is nested more than {MAX_DEPTH} levels deep; no profile is")


def _skip(event: str, events: Events, depth: int) -> None:
    """Consume the rest of a value (first event `event`) that starts `depth` levels down.

    The hot loop of a full profile (every instruction row passes through it): kept to two
    comparisons per event."""
    if event not in _OPEN:
        return
    level = depth + 1
    for event, _ in events:
        if event in _OPEN:
            level += 1
            if level > MAX_DEPTH:
                raise _too_deep()
        elif event in _CLOSE:
            level -= 1
            if level == depth:
                return


class _Builder:
    """Builds values from events: at most MAX_FIELDS items, MAX_TEXT_CHARS per text, MAX_DEPTH levels."""

    def __init__(self) -> None:
        self.items = 0

    def value(self, event: str, value: Any, events: Events, depth: int) -> object:
        self.items += 1
        if self.items > MAX_FIELDS:
            raise _Refused(f"has a summary of more than {MAX_FIELDS} values; no profile does")
        if event in _OPEN and depth >= MAX_DEPTH:
            raise _too_deep()
        if event == "start_map":
            return self.mapping(events, depth + 1)
        if event == "start_array":
            out: list[object] = []
            for item_event, item in events:
                if item_event == "end_array":
                    return out
                out.append(self.value(item_event, item, events, depth + 1))
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise _Refused(f"has a summary text of {len(value)} characters; no profile field is that long")
        return value

    def mapping(self, events: Events, depth: int, first: tuple[str, Any] | None = None) -> dict[str, object]:
        """The rest of an object (its `start_map` consumed, at `depth`), and its first key/value if given."""
        out: dict[str, object] = dict([first]) if first else {}
        for event, key in events:
            if event == "end_map":
                return out
            item_event, item = next(events)
            out[key] = self.value(item_event, item, events, depth)
        raise _Refused("ends inside an object")


def detect_format(path: Path) -> str:
    """Parquet by path; otherwise by the first top-level value, read from the first few events.

    Every top-level value of a full profile is a table (a list), with `summary` first or later;
    summary-json's first value is a record keyed by profile id (an object) or, bare, a scalar.
    """
    if path.is_dir() or path.suffix == ".parquet":
        return "parquet"
    with _errors(path), open(path, "rb") as handle:
        first = [event for event, _ in _take(_events(handle), 3)]
    if first[:1] != ["start_map"]:
        raise fail(path, "top level of the profile is not a JSON object")
    if first[1:2] != ["map_key"]:
        raise fail(path, "no summary record (empty JSON object)")
    return "json" if first[2:3] == ["start_array"] else "summary-json"


def _take(events: Iterator[tuple[str, Any]], n: int) -> list[tuple[str, Any]]:
    return [event for _, event in zip(range(n), events, strict=False)]


def read_full_json(path: Path) -> tuple[Record, None]:
    """Stream to `summary[0]`, build only it, and stop there."""
    with _errors(path), open(path, "rb") as handle:
        events = _events(handle)
        if next(events, (None, None))[0] != "start_map":
            raise fail(path, "top level of the profile is not a JSON object")
        for event, key in events:
            if event == "end_map":
                break
            value_event, _ = next(events)
            if key != "summary":
                _skip(value_event, events, 1)
                continue
            if value_event != "start_array":
                raise fail(path, "'summary' is not a list")
            first, _ = next(events)
            if first == "end_array":
                break
            if first != "start_map":
                raise fail(path, "summary[0] is not a JSON object")
            return _Builder().mapping(events, 3), None
    raise fail(path, "no summary record (the 'summary' list is missing or empty)")


def read_summary_json(path: Path) -> tuple[Record, None]:
    """`{profile_id: record}`, or the bare record; only the first record is built, the rest is read
    through (not built) so that a torn file is an error, not half a summary."""
    with _errors(path), open(path, "rb") as handle:
        events = _events(handle)
        if next(events, (None, None))[0] != "start_map":
            raise fail(path, "top level of the profile is not a JSON object")
        event, key = next(events)
        if event == "end_map":
            raise fail(path, "no summary record (empty JSON object)")
        value_event, value = next(events)
        builder = _Builder()
        if value_event == "start_map":
            record = builder.mapping(events, 2)
        elif value_event != "start_array":
            record = builder.mapping(events, 1, (key, builder.value(value_event, value, events, 1)))
        else:
            _skip(value_event, events, 1)
        _skip("start_map", events, 0)  # the rest of the top-level object
        if next(events, None) is not None:
            raise fail(path, "not valid JSON: more after the top-level object")
    if value_event == "start_array":
        raise fail(path, "holds tables, not a summary: read it as format 'json'")
    return record, None


def read_parquet(path: Path) -> tuple[Record, dict[str, object] | None]:
    """An Explorer output directory, or its Summary.parquet; Metadata.parquet sits beside it."""
    summary_path = path / "Summary.parquet" if path.is_dir() else path
    rows = _parquet_rows(summary_path, 1)
    if not rows:
        raise fail(summary_path, "no summary record (Summary table has no rows)")
    metadata_path = summary_path.with_name("Metadata.parquet")
    metadata = _metadata_facts(_parquet_rows(metadata_path, MAX_METADATA_ROWS)) if metadata_path.exists() else None
    return rows[0], metadata


def _parquet_rows(path: Path, limit: int) -> list[dict[str, object]]:
    """The first `limit` rows, after checking from the footer that decoding them stays small."""
    import pyarrow  # deferred: only Parquet needs pyarrow, a heavy import for every other path
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
        meta = table.metadata
        if meta.num_columns > MAX_FIELDS:
            raise fail(path, f"has {meta.num_columns} columns; a profile table has far fewer")
        first_group = meta.row_group(0).total_byte_size if meta.num_row_groups else 0
        if first_group > MAX_TABLE_BYTES:
            raise fail(path, f"holds {first_group} bytes in its first row group; a profile table is far smaller")
        if meta.num_rows > limit and limit > 1:
            raise fail(path, f"has {meta.num_rows} rows; a profile's metadata has far fewer")
        batch = next(table.iter_batches(batch_size=limit), None)
        return batch.to_pylist() if batch is not None else []
    except (OSError, pyarrow.ArrowException) as err:
        raise fail(path, f"cannot read Parquet table: {err}") from None


def _metadata_facts(rows: list[dict[str, object]]) -> dict[str, object]:
    """Metadata comes as key/value rows or as one wide row; key/value wins if both could apply."""
    if rows and {"key", "value"} <= rows[0].keys():
        return {str(row["key"]): row["value"] for row in rows}
    return rows[0] if rows else {}


READERS = {"json": read_full_json, "summary-json": read_summary_json, "parquet": read_parquet}
