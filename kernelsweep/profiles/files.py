"""Read the summary record out of a profile file, in bounded memory and time whatever the file holds.

`neuron-profile view` / `neuron-explorer view` write the summary in three containers: full JSON
(every table; ~1 GB per 250k instructions, `summary` first or after the instruction table),
summary-json (a few KB) and Explorer Parquet (`Summary.parquet` + `Metadata.parquet`). A reader
here returns every summary entry as the profiler wrote it (at LNC=2 there may be one per physical
core), with what the container says about them (Parquet: Metadata, SchemaFields, Warning);
kernelsweep.profiles.metrics normalises and aggregates them.

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
* the summary entries together are at most MAX_FIELDS values (and MAX_ENTRIES entries), their
  texts at most MAX_TEXT_CHARS each;
* Parquet: at most MAX_ENTRIES Summary rows are decoded, and tables beyond MAX_TABLE_BYTES are refused.
Every failure is a one-line ExtractError naming the file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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
MAX_METADATA_ROWS = 10_000  # also SchemaFields (one row per table and field) and Warning
MAX_ENTRIES = 64  # summary entries in one profile: one per physical core of the captured logical core
_OPEN = ("start_map", "start_array")
_CLOSE = ("end_map", "end_array")
_NUMBER_BYTES = b"0123456789+-.eE"

Record = Mapping[str, object]
Events = Iterator[tuple[str, Any]]


@dataclass(frozen=True)
class RawProfile:
    """A profile's summary entries as written, and what its container says about them."""

    records: Sequence[Record]
    metadata: dict[str, object] | None = None
    schema_fields: list[dict[str, object]] | None = None  # Explorer's SchemaFields rows
    warnings: tuple[str, ...] = ()  # Explorer's Warning table messages


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


def read_full_json(path: Path) -> RawProfile:
    """Stream to the `summary` list, build only its entries, and stop there."""
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
            records = _entries(path, events)
            if records:
                return RawProfile(records)
            break
    raise fail(path, "no summary record (the 'summary' list is missing or empty)")


def _entries(path: Path, events: Events) -> list[Record]:
    """The objects of the `summary` list (its `start_array` consumed)."""
    builder, records = _Builder(), list[Record]()
    for event, _ in events:
        if event == "end_array":
            return records
        if event != "start_map":
            raise fail(path, f"summary[{len(records)}] is not a JSON object")
        if len(records) == MAX_ENTRIES:
            raise _Refused(f"has more than {MAX_ENTRIES} summary entries; no profile does")
        records.append(builder.mapping(events, 3))
    raise _Refused("ends inside the summary list")


def read_summary_json(path: Path) -> RawProfile:
    """`{profile_id: record, ...}` (one entry per physical core where the profiler writes one each),
    or the bare record; read through to the end so that a torn file is an error, not half a summary."""
    with _errors(path), open(path, "rb") as handle:
        events = _events(handle)
        if next(events, (None, None))[0] != "start_map":
            raise fail(path, "top level of the profile is not a JSON object")
        event, key = next(events)
        if event == "end_map":
            raise fail(path, "no summary record (empty JSON object)")
        value_event, value = next(events)
        builder, records = _Builder(), list[Record]()
        if value_event == "start_map":
            records = [builder.mapping(events, 2), *_more_entries(events, builder)]
        elif value_event != "start_array":
            records = [builder.mapping(events, 1, (key, builder.value(value_event, value, events, 1)))]
        else:  # a full profile's tables: read through, so a torn file still reads as invalid JSON
            _skip(value_event, events, 1)
            _skip("start_map", events, 0)
        if next(events, None) is not None:
            raise fail(path, "not valid JSON: more after the top-level object")
    if not records:
        raise fail(path, "holds tables, not a summary: read it as format 'json'")
    return RawProfile(records)


def _more_entries(events: Events, builder: _Builder) -> Iterator[Record]:
    """The top-level object's other values that are records; anything else is read through."""
    count = 1
    for event, _ in events:
        if event == "end_map":
            return
        value_event, _ = next(events)
        if value_event != "start_map":
            _skip(value_event, events, 1)
            continue
        count += 1
        if count > MAX_ENTRIES:
            raise _Refused(f"has more than {MAX_ENTRIES} summary entries; no profile does")
        yield builder.mapping(events, 2)
