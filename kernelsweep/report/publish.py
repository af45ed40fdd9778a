"""Store a report's files in a folder or under an S3 prefix, next to the results they describe.

`reports/` sits beside the dataset's `v1/` table prefix, never inside it, so no Parquet reader
ever lists a report file. Each report goes to its own folder (`reports/<id>/`), written once.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep import s3
from kernelsweep.errors import UsageError
from kernelsweep.report.html import INDEX

REPORTS_FOLDER = "reports"


def report_location(results_uri: str, report_id: str) -> str:
    """Where a report made from `results_uri` is stored: `<results>/reports/<report_id>`."""
    if s3.is_s3_uri(results_uri):
        where = s3.parse_s3_uri(results_uri)
        return where.uri(where.key(f"{REPORTS_FOLDER}/{report_id}"))
    if "://" in results_uri:
        raise UsageError(f"results location {results_uri!r}: use a folder path or s3://bucket/prefix")
    return str(Path(results_uri) / REPORTS_FOLDER / report_id)


def write_bundle(files: dict[str, bytes], destination: str, client: s3.S3Client | None = None) -> str:
    """Every file under `destination` (a folder or s3:// prefix); returns the location of index.html."""
    if s3.is_s3_uri(destination):
        where = s3.parse_s3_uri(destination)
        client = client or s3.make_client()
        for name, data in sorted(files.items()):
            key = where.key(name)
            content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
            try:
                client.put_object(Bucket=where.bucket, Key=key, Body=data, ContentType=content_type)
            except (ClientError, BotoCoreError) as exc:
                raise s3.translate(exc, f"writing {where.uri(key)}") from exc
        return where.uri(where.key(INDEX))
    folder = Path(destination)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        partial = folder / f".{name}.partial"  # a crash never leaves a half-written page under its name
        partial.write_bytes(data)
        partial.replace(folder / name)
    return str(folder / INDEX)


def browser_link(location: str) -> str:
    """A link a person can open: file:// for a folder; for S3, the object on the configured endpoint
    (a test or private S3 server), else in the AWS console (which asks for the reader's own login)."""
    if not s3.is_s3_uri(location):
        return Path(location).resolve().as_uri()
    where = s3.parse_s3_uri(location)
    endpoint = s3.configured_endpoint()
    if endpoint:
        return f"{endpoint.rstrip('/')}/{where.bucket}/{quote(where.prefix)}"
    return f"https://console.aws.amazon.com/s3/object/{where.bucket}?prefix={quote(where.prefix)}"
