"""What a journal object must be before anything in it is believed: read, never trusted.

A journal lives next to the results, where any process, a full disk, a sync tool or a person can
leave a file in it. Everything read back is checked, so no content can crash a run (exit 4) or wedge
a spec for good: a header must be a JSON object of this format version with each field of its type
(pydantic, strict: no string or bool taken for a number); an entry must hold a row whose every field
has its type and whose `row_id` is the one its run id and point give (`rows.row_id`). A bad entry is
no measurement (its point runs again); a header of another format version is refused with what to
do (`JournalFormatError`); any other bad header is an abandoned run (kernelsweep.results.journal).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from kernelsweep.errors import UsageError
from kernelsweep.results.rows import Row

FORMAT_VERSION = 1
MAX_OBJECT_BYTES = 16 << 20  # a row is a few KiB; anything far larger is not a journal object
_TIMES = ("started_at", "finished_at")


class BadJournalObject(ValueError):
    """An object that is not what a journal writes; the message says what is wrong, in one line."""


class JournalFormatError(UsageError):
    """A header written by another journal format: refused, naming the way out."""


class HeaderDoc(BaseModel):
    """`run.json` as it is written: every field typed, nothing else in it."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    format: int
    run_key: str
    run_id: str
    run_date: str
    sweep: str
    started_at: str
    shards: dict[str, str] = {}


def _row_model() -> type[BaseModel]:
    """`Row`'s fields as a strict model: a dataclass itself validates only its own instances strictly."""
    hints = get_type_hints(Row)
    specs: dict[str, Any] = {}
    for f in dataclasses.fields(Row):
        if f.default is not dataclasses.MISSING:
            specs[f.name] = (hints[f.name], f.default)
        elif f.default_factory is not dataclasses.MISSING:
            specs[f.name] = (hints[f.name], Field(default_factory=f.default_factory))
        else:
            specs[f.name] = (hints[f.name], ...)
    return create_model("RowDoc", __config__=ConfigDict(strict=True, extra="forbid"), **specs)


_ROW = _row_model()


def parse_json(data: bytes, what: str) -> Any:
    if len(data) > MAX_OBJECT_BYTES:
        raise BadJournalObject(f"{len(data)} bytes is too large for a journal {what}")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise BadJournalObject(f"not JSON ({_first_line(exc)})") from None


def check_header(data: bytes, uri: str) -> HeaderDoc:
    """The header's fields, typed; JournalFormatError for another format version."""
    doc = parse_json(data, "header")
    if not isinstance(doc, dict):
        raise BadJournalObject(f"a JSON {type(doc).__name__}, not an object")
    version = doc.get("format")
    if version != FORMAT_VERSION:
        written = f"format {version!r}" if version is not None else "no format version"
        raise JournalFormatError(
            f"the journal {uri} has {written}, this kernelsweep reads format {FORMAT_VERSION}: finish that run "
            "with the kernelsweep version that started it, or start over with --remeasure (its journal is removed)"
        )
    try:
        header = HeaderDoc.model_validate(doc)
        date.fromisoformat(header.run_date)
        datetime.fromisoformat(header.started_at)
    except ValidationError as exc:
        raise BadJournalObject(_pydantic_line(exc)) from None
    except ValueError as exc:
        raise BadJournalObject(_first_line(exc)) from None
    return header


def check_entry(data: bytes) -> Row:
    """The entry's row, every field of its type (the caller checks that it is the point's)."""
    doc = parse_json(data, "entry")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION or not isinstance(doc.get("row"), dict):
        raise BadJournalObject(f"not a format-{FORMAT_VERSION} entry (an object with `format` and `row`)")
    fields = dict(doc["row"])
    try:
        for name in _TIMES:
            value = fields.get(name)
            if value is not None:
                if not isinstance(value, str):
                    raise BadJournalObject(f"{name} is not an ISO time")
                fields[name] = datetime.fromisoformat(value)
        checked = _ROW.model_validate(fields)
        row = Row(**{name: getattr(checked, name) for name in type(checked).model_fields})
    except ValidationError as exc:
        raise BadJournalObject(_pydantic_line(exc)) from None
    except ValueError as exc:  # a bad ISO time; Row's own checks (unknown metrics)
        raise BadJournalObject(_first_line(exc)) from None
    _check_times(row)
    return row


def _check_times(row: Row) -> None:
    """No time a measurement gives is negative or not finite, and a point ends after it starts: such an
    entry was never written by a run (a hand edit, a broken clock, a bit flip) and is no measurement."""
    named = {f.name: getattr(row, f.name) for f in dataclasses.fields(Row)} | {
        f"metrics.{k}": v for k, v in row.metrics.items()
    }
    for name, value in named.items():
        if not name.endswith(("_us", "_seconds")) or value is None:
            continue
        for number in value if isinstance(value, list) else [value]:
            if isinstance(number, int | float) and not (math.isfinite(number) and number >= 0):
                raise BadJournalObject(f"{name} is {number}: a time is a finite number of at least 0")
    if row.started_at is not None and row.finished_at is not None and row.finished_at < row.started_at:
        raise BadJournalObject("finished_at is before started_at")


@dataclass(frozen=True)
class RunHeader:
    run_key: str
    run_id: str  # the flow run that started the run; its rows and objects carry this id
    run_date: date  # the date in the objects' keys, fixed at the start
    sweep: str
    started_at: str
    shards: dict[str, str] = field(default_factory=dict)  # shard index -> that shard's flow run id

    def to_json(self) -> bytes:
        return json.dumps({"format": FORMAT_VERSION, **asdict(self), "run_date": self.run_date.isoformat()}).encode()

    @classmethod
    def from_json(cls, data: bytes, uri: str = "run.json") -> RunHeader:
        """Checked (journal_check.check_header): BadJournalObject, or JournalFormatError for another format."""
        doc = check_header(data, uri).model_dump(exclude={"format"})
        return cls(**{**doc, "run_date": date.fromisoformat(doc["run_date"])})


def _pydantic_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(_printable(str(p)) for p in err["loc"]) or "top level"
    return f"{where}: {err['msg']}"


def _printable(key: str) -> str:
    """A key as it can stand in a one-line message: quoted when it is empty, padded or holds a line break."""
    return key if key.isprintable() and key.strip() == key and key else repr(key)


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
