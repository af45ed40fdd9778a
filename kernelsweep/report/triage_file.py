"""The triage file inside the results: `<results>/_triage/changes.json`, in a folder or under the
results' S3 prefix, holding every status change ever made, oldest first.

Each change is appended by reading the document, adding to it and writing it back whole, so the
file is always one valid JSON document and its history is never rewritten. Two people triaging at
once must not lose a change: in a folder the read-add-write runs under `flock` on a lock file
beside it and the new document replaces the old by rename (whole or absent, even on a full disk);
on S3 the write is conditional on the object being the one read (`If-Match` its ETag, or
`If-None-Match: *` while there is none), and a write that lost the race reads again and retries.
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.errors import StoreError, UsageError
from kernelsweep.results.journal_files import open_files
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

TRIAGE_FOLDER = "_triage"
FILE_NAME = "changes.json"
FORMAT_VERSION = 1
CONFLICT_ATTEMPTS = 8  # concurrent writers on one S3 object: each retry re-reads, so this many is plenty
_LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")

Document = dict[str, Any]


def location(results: Location | str) -> Location:
    """Where the triage file of `results` lives."""
    return parse_location(results, "results location").child(f"{TRIAGE_FOLDER}/{FILE_NAME}")


def read(results: Location | str) -> Document:
    """The document (an empty one when nobody has triaged yet); a file that is not one is a usage error."""
    where = location(results)
    if isinstance(where, s3.S3Location):
        data, _ = _s3_read(s3.make_client(), where)
    else:
        try:
            data = where.path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError as exc:
            raise StoreError(f"reading {where.path}: {exc.strerror}", error_class="TriageUnreadable") from exc
    return _parsed(data, str(where))


def append(results: Location | str, change: Document) -> str:
    """Add one change at the end, atomically and without losing a concurrent writer's; returns the file's URI."""
    where = location(results)
    if isinstance(where, s3.S3Location):
        _s3_append(s3.make_client(), where, change)
    else:
        _folder_append(results, where.path, change)
    return str(where)


def _parsed(data: bytes | None, uri: str) -> Document:
    if data is None:
        return {"format_version": FORMAT_VERSION, "changes": []}
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("changes"), list):
        raise UsageError(
            f"{uri}: not a triage file (a JSON object with a list of changes); restore it from a backup or "
            "remove it, then triage again with `kernelsweep triage`"
        )
    return doc


def _with(doc: Document, change: Document) -> bytes:
    return json.dumps(
        {**doc, "format_version": FORMAT_VERSION, "changes": [*doc["changes"], change]}, indent=1
    ).encode()


def _folder_append(results: Location | str, path: Path, change: Document) -> None:
    """Replaced whole by rename (the journal's own folder writes), under the lock."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(f".{FILE_NAME}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # dropped on close, or by the kernel when the holder dies
            data = path.read_bytes() if path.exists() else None
            open_files(results, folder=TRIAGE_FOLDER).put(FILE_NAME, _with(_parsed(data, str(path)), change))
    except OSError as exc:
        raise StoreError(f"writing {path}: {exc.strerror}", error_class="TriageWriteFailed") from exc


def _s3_read(client: s3.S3Client, where: s3.S3Location) -> tuple[bytes | None, str | None]:
    """The object's bytes and ETag; (None, None) when there is none yet."""
    try:
        response = client.get_object(Bucket=where.bucket, Key=where.prefix)
        return response["Body"].read(), response["ETag"]
    except ClientError as exc:
        if s3.error_code(exc) in ("404", "NoSuchKey"):
            return None, None
        raise s3.translate(exc, f"reading {where}") from exc
    except BotoCoreError as exc:
        raise s3.translate(exc, f"reading {where}") from exc


def _s3_append(client: s3.S3Client, where: s3.S3Location, change: Document) -> None:
    for _ in range(CONFLICT_ATTEMPTS):
        data, etag = _s3_read(client, where)
        body = _with(_parsed(data, str(where)), change)
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            client.put_object(
                Bucket=where.bucket, Key=where.prefix, Body=body, ContentType="application/json", **condition
            )
            return
        except ClientError as exc:
            if s3.error_code(exc) not in _LOST_RACE:
                raise s3.translate(exc, f"writing {where}") from exc
        except BotoCoreError as exc:
            raise s3.translate(exc, f"writing {where}") from exc
    raise StoreError(
        f"writing {where}: another writer changed it {CONFLICT_ATTEMPTS} times in a row; run the command again",
        retryable=True,
        error_class="TriageWriteConflict",
    )
