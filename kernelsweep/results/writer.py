"""Write a flow run's rows as one immutable Parquet object per platform partition, locally or on S3.

Layout: `<results>/v1/platform=<p>/run_date=<YYYY-MM-DD>/<flow_run_id>.parquet`. An object is created
once and never replaced: S3 through `PutObject` with `If-None-Match: *`, a folder through a hard link
of a fully written hidden temp file (link, unlike rename, refuses to replace). When the name is
taken, the stored sha256 decides: the same bytes mean a retry whose first answer was lost (done);
other bytes mean the run was re-executed, and the new rows go to `<flow_run_id>.attempt-N.parquet`
so that neither result is lost. Identical rows always serialise to identical bytes (rows are sorted
by a total key and nothing time-dependent is added here), so retries are recognised as such.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import random
import re
import tempfile
import time
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.errors import StoreError
from kernelsweep.results.schema import SCHEMA_VERSION, schema_for
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

if TYPE_CHECKING:  # rows build on the stages; reading results must not import them
    from kernelsweep.results.rows import Row

LAYOUT_VERSION = "v1"
MAX_ATTEMPTS = 100
CONFLICT_RETRIES = 5  # S3 answers 409 when conditional writes to one key overlap; AWS says retry
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

log = logging.getLogger(__name__)

Outcome = Literal["created", "exists-identical", "exists-different"]


def object_key(platform: str, run_date: date, flow_run_id: str, attempt: int = 1) -> str:
    """The dataset-relative key; names that would escape the layout are refused."""
    for what, value in (("platform", platform), ("flow_run_id", flow_run_id)):
        if not _NAME.match(value) or ".." in value:
            raise StoreError(f"{what} {value!r} cannot be part of a results key")
    suffix = "" if attempt == 1 else f".attempt-{attempt}"
    return f"{LAYOUT_VERSION}/platform={platform}/run_date={run_date.isoformat()}/{flow_run_id}{suffix}.parquet"


def rows_to_table(rows: Iterable[Row], lineage: dict) -> pa.Table:
    """Rows sorted by a total key (row_id last) and param columns in that order, so the order the
    point threads finished in never changes the bytes.

    `Table.from_pylist` drops keys its schema lacks without a word; here such a key is an error.
    """
    ordered = sorted(rows, key=lambda r: (r.kernel, r.shape, r.dtype, r.row_id))
    axes = dict.fromkeys(axis for row in ordered for axis in row.params)
    schema = schema_for(list(axes))
    records = [row.record() for row in ordered]
    unknown = {key for record in records for key in record} - set(schema.names)
    if unknown:
        raise StoreError(f"rows carry columns the results schema lacks: {sorted(unknown)}")
    table = pa.Table.from_pylist(records, schema=schema)
    metadata = {
        b"kernelsweep.schema_version": str(SCHEMA_VERSION).encode(),
        b"kernelsweep.lineage": json.dumps(lineage, sort_keys=True, default=str).encode(),
    }
    return table.replace_schema_metadata(metadata)


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


class ResultTarget(Protocol):
    """Create-if-absent storage: the one primitive the attempt logic needs from a backend."""

    def create(self, key: str, data: bytes, sha256: str) -> Outcome: ...

    def uri(self, key: str) -> str: ...


class LocalTarget:
    def __init__(self, root: Path) -> None:
        self.root = root

    def uri(self, key: str) -> str:
        return str(self.root / key)

    def create(self, key: str, data: bytes, sha256: str) -> Outcome:
        """A full disk or a folder gone read-only is a StoreError naming the folder, never a bare OSError."""
        target = self.root / key
        try:
            return self._create(target, data, sha256)
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise StoreError(f"writing {target}: {reason}", error_class="ResultsWriteFailed") from exc

    @staticmethod
    def _create(target: Path, data: bytes, sha256: str) -> Outcome:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Hidden name: dataset readers skip it, so a crash here never shows up as a partial file.
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-", suffix=".parquet")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(tmp, target)
            return "created"
        except FileExistsError:
            return "exists-identical" if _sha256(target.read_bytes()) == sha256 else "exists-different"
        finally:
            Path(tmp).unlink(missing_ok=True)


class S3Target:
    def __init__(self, where: s3.S3Location, client: s3.S3Client) -> None:
        self.where = where
        self.client = client

    def uri(self, key: str) -> str:
        return self.where.uri(self.where.key(key))

    def create(self, key: str, data: bytes, sha256: str) -> Outcome:
        conflicts = 0
        while True:
            try:
                return self._put(self.where.key(key), data, sha256)
            except ClientError as exc:
                if s3.error_code(exc) != "ConditionalRequestConflict" or conflicts == CONFLICT_RETRIES:
                    raise s3.translate(exc, f"writing {self.uri(key)}") from exc
            except BotoCoreError as exc:
                raise s3.translate(exc, f"writing {self.uri(key)}") from exc
            conflicts += 1
            time.sleep(random.uniform(0, 0.05 * 2**conflicts))

    def _put(self, full_key: str, data: bytes, sha256: str) -> Outcome:
        try:
            self.client.put_object(
                Bucket=self.where.bucket,
                Key=full_key,
                Body=data,
                IfNoneMatch="*",
                ChecksumAlgorithm="SHA256",
                Metadata={"sha256": sha256},
            )
            return "created"
        except ClientError as exc:
            if s3.error_code(exc) != "PreconditionFailed":
                raise
        stored = self.client.head_object(Bucket=self.where.bucket, Key=full_key)
        return "exists-identical" if stored.get("Metadata", {}).get("sha256") == sha256 else "exists-different"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_object(target: ResultTarget, platform: str, run_date: date, flow_run_id: str, data: bytes) -> str:
    """Store one run's object under the first attempt key that is free or already holds these bytes."""
    sha = _sha256(data)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        key = object_key(platform, run_date, flow_run_id, attempt)
        outcome = target.create(key, data, sha)
        if outcome == "exists-identical":
            log.info("%s already holds these rows (a retried write); nothing to do", target.uri(key))
            return target.uri(key)
        if outcome == "created":
            if attempt > 1:
                log.warning(
                    "flow run %s already stored different rows for %s on %s; this attempt is kept as %s",
                    flow_run_id,
                    platform,
                    run_date,
                    target.uri(key),
                )
            return target.uri(key)
    raise StoreError(f"flow run {flow_run_id} has {MAX_ATTEMPTS} different result objects for {platform}; giving up")


def open_target(results: Location | str, client: s3.S3Client | None = None, *, connect: bool = True) -> ResultTarget:
    """A folder, or an S3 bucket and prefix (with `client`, or a new client from the default chain;
    none with `connect=False`, for a target that only names its objects)."""
    where = parse_location(results, "results location")
    if isinstance(where, s3.S3Location):
        return S3Target(where, client or (s3.make_client() if connect else None))
    return LocalTarget(where.path)


def planned_uris(results: Location | str, platforms: Iterable[str], run_date: date, flow_run_id: str) -> list[str]:
    """Where a run's first-attempt objects go, known before the write (for asset declarations)."""
    target = open_target(results, connect=False)  # naming needs no connection
    return [target.uri(object_key(p, run_date, flow_run_id)) for p in sorted(set(platforms))]


def write_results(
    rows: Iterable[Row],
    results_uri: Location | str,
    *,
    flow_run_id: str,
    run_date: date,
    lineage: dict,
    client: s3.S3Client | None = None,
) -> list[str]:
    """One object per platform present in `rows`; returns their locations (paths or s3:// URIs).

    `run_date` must be the run's scheduled date, not today's, so a retry after midnight keeps its key.
    """
    target = open_target(results_uri, client)
    by_platform: dict[str, list[Row]] = {}
    for row in rows:
        by_platform.setdefault(row.platform, []).append(row)
    written = []
    for platform, platform_rows in sorted(by_platform.items()):
        data = parquet_bytes(rows_to_table(platform_rows, lineage))
        written.append(write_object(target, platform, run_date, flow_run_id, data))
    return written
