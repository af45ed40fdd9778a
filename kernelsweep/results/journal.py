"""A run's journal: each point's row, durable the moment the point finishes, next to the results.

A sweep's Parquet objects are written once, when every point is done. Until then its rows live
here, one small object per point, so a run stopped by Ctrl-C, SIGTERM, SIGKILL, a dead S3 endpoint
or a full disk loses nothing it measured: `kernelsweep run` on the same spec finds the journal,
reuses every point that finished ok, measures the rest and writes the objects from both.

    <results>/_journal/<run key>/<run id>/run.json          which run this is (id, date, shard ids)
    <results>/_journal/<run key>/<run id>/points/<p>.json   one finished point's row

The run key names the spec (its name and a hash of its content), so only a run of the same spec
is resumed. The leading underscore and the place outside `v1/` keep the journal out of every
reader's sight (pyarrow, Athena and Glue skip `_` names). A resumed run finishes under the
interrupted run's id and date: its rows keep their `row_id`s and its objects their keys.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep import s3
from kernelsweep.errors import StoreError, UsageError
from kernelsweep.results.rows import Row
from kernelsweep.spec import Point, SweepSpec

JOURNAL_FOLDER = "_journal"
HEADER = "run.json"
FORMAT_VERSION = 1
READ_THREADS = 16
_POINT_NAMESPACE = uuid.UUID("0c6f3d52-2b8e-4f51-9d4e-5a1f7e0b9c13")
_TIMES = ("started_at", "finished_at")
_UNSAFE = re.compile(r"[^a-z0-9-]+")

log = logging.getLogger(__name__)


def run_key(spec: SweepSpec, scope: str = "sweep") -> str:
    """`<name>-<hash>`: the same spec (after command-line overrides) always gets the same key.

    `compile_slots` is left out: it changes how fast a host works, not what a run measures.
    """
    content = spec.model_dump(mode="json", exclude={"execution": {"compile_slots"}})
    digest = hashlib.sha256(json.dumps([scope, content], sort_keys=True).encode()).hexdigest()[:16]
    name = _UNSAFE.sub("-", spec.name.lower()).strip("-")[:64] or "sweep"
    return f"{name}-{digest}"


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
    def from_json(cls, data: bytes) -> RunHeader:
        doc = json.loads(data)
        doc.pop("format", None)
        return cls(**{**doc, "run_date": date.fromisoformat(doc["run_date"])})


def encode_row(row: Row) -> bytes:
    """Exact: `decode_row(encode_row(row)) == row`, so an object assembled from the journal has the
    very bytes one assembled from memory would (floats round-trip through JSON's repr)."""
    doc: dict[str, Any] = {f.name: getattr(row, f.name) for f in fields(Row)}
    doc["metrics"] = dict(row.metrics)
    for name in _TIMES:
        doc[name] = doc[name].isoformat() if doc[name] is not None else None
    return json.dumps({"format": FORMAT_VERSION, "row": doc}).encode()


def decode_row(data: bytes) -> Row:
    doc = json.loads(data)["row"]
    for name in _TIMES:
        doc[name] = datetime.fromisoformat(doc[name]) if doc[name] is not None else None
    return Row(**doc)


def entry_name(point: Point) -> str:
    """A point's entry: a UUID of its id, so any point id (however long) makes a short, safe name."""
    return f"{uuid.uuid5(_POINT_NAMESPACE, point.point_id)}.json"


class _Files(Protocol):
    """The four operations a journal needs, on a folder or under an S3 prefix."""

    def put(self, name: str, data: bytes) -> None: ...

    def get(self, name: str) -> bytes | None: ...

    def list(self, prefix: str) -> list[str]: ...

    def delete(self, names: Iterable[str]) -> None: ...

    def uri(self, name: str) -> str: ...


class _LocalFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    def uri(self, name: str) -> str:
        return str(self.root / name)

    def put(self, name: str, data: bytes) -> None:
        """Written under a hidden name and renamed: an entry is whole or absent, even on a full disk."""
        target = self.root / name
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
            tmp = None
        except OSError as exc:
            raise _folder_error(target, "writing", exc) from exc
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def get(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _folder_error(self.root / name, "reading", exc) from exc

    def list(self, prefix: str) -> list[str]:
        folder = self.root / prefix
        if not folder.is_dir():
            return []
        return sorted(
            str(p.relative_to(self.root)) for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
        )

    def delete(self, names: Iterable[str]) -> None:
        folders: set[Path] = set()
        for name in names:
            path = self.root / name
            path.unlink(missing_ok=True)
            folders.update(p for p in path.parents if p == self.root or self.root in p.parents)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            try:
                folder.rmdir()
            except OSError:  # not empty (another run's, or a leftover temp file): leave it
                pass


def _folder_error(path: Path, action: str, exc: OSError) -> StoreError:
    reason = exc.strerror or type(exc).__name__
    return StoreError(f"{action} {path}: {reason}", error_class="JournalWriteFailed", retryable=False)


class _S3Files:
    def __init__(self, where: s3.S3Location, client: s3.S3Client) -> None:
        self.where, self.client = where, client

    def uri(self, name: str) -> str:
        return self.where.uri(self.where.key(name))

    def _call(self, action: str, name: str, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, method)(Bucket=self.where.bucket, **kwargs)
        except (BotoCoreError, ClientError) as exc:
            raise s3.translate(exc, f"{action} {self.uri(name)}") from exc

    def put(self, name: str, data: bytes) -> None:
        self._call("writing", name, "put_object", Key=self.where.key(name), Body=data)

    def get(self, name: str) -> bytes | None:
        try:
            response = self.client.get_object(Bucket=self.where.bucket, Key=self.where.key(name))
            return response["Body"].read()
        except ClientError as exc:
            if s3.error_code(exc) in ("404", "NoSuchKey"):
                return None
            raise s3.translate(exc, f"reading {self.uri(name)}") from exc
        except BotoCoreError as exc:
            raise s3.translate(exc, f"reading {self.uri(name)}") from exc

    def list(self, prefix: str) -> list[str]:
        base = self.where.key("")
        pages = self.client.get_paginator("list_objects_v2")
        try:
            found = [
                obj["Key"][len(base) :]
                for page in pages.paginate(Bucket=self.where.bucket, Prefix=self.where.key(prefix))
                for obj in page.get("Contents", [])
            ]
        except (BotoCoreError, ClientError) as exc:
            raise s3.translate(exc, f"listing {self.uri(prefix)}") from exc
        return sorted(found)

    def delete(self, names: Iterable[str]) -> None:
        keys = [{"Key": self.where.key(n)} for n in names]
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            self._call("deleting", "", "delete_objects", Delete={"Objects": keys[start : start + 1000]})


def _files(results_uri: str, client: s3.S3Client | None = None) -> _Files:
    if s3.is_s3_uri(results_uri):
        where = s3.parse_s3_uri(results_uri)
        return _S3Files(s3.S3Location(where.bucket, where.key(JOURNAL_FOLDER)), client or s3.make_client())
    if "://" in results_uri:
        raise UsageError(f"results location {results_uri!r}: use a folder path or s3://bucket/prefix")
    return _LocalFiles(Path(results_uri) / JOURNAL_FOLDER)


class Journal:
    """One run's journal. `record` is called from the flow's thread as each point finishes."""

    def __init__(self, files: _Files, header: RunHeader) -> None:
        self.files, self.header = files, header
        self.base = f"{header.run_key}/{header.run_id}"

    @property
    def run_id(self) -> str:
        return self.header.run_id

    @property
    def run_date(self) -> date:
        return self.header.run_date

    @property
    def uri(self) -> str:
        return self.files.uri(self.base)

    def record(self, point: Point, row: Row) -> None:
        """Durable on return (fsync'd file, or a completed PutObject)."""
        self.files.put(f"{self.base}/points/{entry_name(point)}", encode_row(row))

    def completed(self, points: Iterable[Point]) -> dict[str, Row]:
        """point_id -> row, for each of `points` whose journaled row is ok (failed points run again).

        An entry that cannot be read back, or that names another point, is no measurement: it is
        reported and its point runs again.
        """
        wanted = {entry_name(p): p for p in points}
        present = [n for n in self.files.list(f"{self.base}/points/") if n.rsplit("/", 1)[-1] in wanted]
        with ThreadPoolExecutor(READ_THREADS) as pool:
            blobs = list(pool.map(self.files.get, present))
        rows: dict[str, Row] = {}
        for name, blob in zip(present, blobs, strict=True):
            point = wanted[name.rsplit("/", 1)[-1]]
            try:
                row = decode_row(blob or b"")
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("journal entry %s is unreadable (%s); point %s runs again", name, exc, point.point_id)
                continue
            same_point = (row.kernel, row.shape, row.dtype, row.platform) == (
                point.kernel,
                point.shape,
                point.dtype,
                point.platform,
            )
            if same_point and row.status == "ok" and row.flow_run_id in self.identities():
                rows[point.point_id] = row
        return rows

    def identities(self) -> set[str]:
        return {self.header.run_id, *self.header.shards.values()}

    def shard_run_id(self, shard: int, flow_run_id: str) -> str:
        """The id shard `shard` finishes under: the one it first ran under, or `flow_run_id` (recorded)."""
        known = self.header.shards.get(str(shard))
        if known:
            return known
        header = replace(self.header, shards={**self.header.shards, str(shard): flow_run_id})
        self.files.put(f"{self.base}/{HEADER}", header.to_json())
        self.header = header
        return flow_run_id

    def close(self) -> None:
        """After the objects are written. The header goes first: a journal without one is never resumed,
        so a close interrupted half-way cannot bring back a run with some of its entries gone."""
        self.files.delete([f"{self.base}/{HEADER}"])
        self.files.delete(self.files.list(f"{self.base}/"))


def start_run(results_uri: str, key: str, run_id: str, run_date: date, sweep: str, started_at: datetime) -> Journal:
    header = RunHeader(run_key=key, run_id=run_id, run_date=run_date, sweep=sweep, started_at=started_at.isoformat())
    files = _files(results_uri)
    files.put(f"{key}/{run_id}/{HEADER}", header.to_json())
    return Journal(files, header)


def open_run(results_uri: str, key: str, run_id: str) -> Journal:
    """The journal of an interrupted run; UsageError when there is none (finished, or another spec's)."""
    files = _files(results_uri)
    data = files.get(f"{key}/{run_id}/{HEADER}")
    if data is None:
        raise UsageError(
            f"no unfinished run {run_id} of this spec in {files.uri(key)}; it finished already, or the spec "
            "changed since it ran (only a run of the very same spec can be resumed)"
        )
    return Journal(files, RunHeader.from_json(data))


def find_unfinished(results_uri: str, key: str) -> RunHeader | None:
    """The newest run of this spec that started but never wrote its objects, if any."""
    files = _files(results_uri)
    headers = []
    for name in files.list(f"{key}/"):
        if name.endswith(f"/{HEADER}") and name.count("/") == 2:
            data = files.get(name)
            try:
                headers.append(RunHeader.from_json(data or b""))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("journal header %s is unreadable (%s); ignoring that run", files.uri(name), exc)
    return max(headers, key=lambda h: h.started_at, default=None)
