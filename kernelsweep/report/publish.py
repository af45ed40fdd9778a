"""Store a report's files in a folder or under an S3 prefix, next to the results they describe.

`reports/` sits beside the dataset's `v1/` table prefix, never inside it, so no Parquet reader
ever lists a report file. Each report goes to its own folder (`reports/<id>/`), written once.
"""

from __future__ import annotations

import mimetypes
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.report.html import INDEX
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

REPORTS_FOLDER = "reports"
PRESIGN_SECONDS = 7 * 24 * 3600  # SigV4's longest


def report_location(results: Location | str, report_id: str) -> Location:
    """Where a report made from `results` is stored: `<results>/reports/<report_id>`."""
    return parse_location(results, "results location").child(f"{REPORTS_FOLDER}/{report_id}")


def write_bundle(files: dict[str, bytes], destination: Location | str, client: s3.S3Client | None = None) -> str:
    """Every file under `destination` (a folder or s3:// prefix); returns the location of index.html."""
    where = parse_location(destination, "report location")
    if isinstance(where, s3.S3Location):
        client = client or s3.make_client()
        for name, data in sorted(files.items()):
            key = where.key(name)
            content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
            try:
                client.put_object(Bucket=where.bucket, Key=key, Body=data, ContentType=content_type)
            except (ClientError, BotoCoreError) as exc:
                raise s3.translate(exc, f"writing {where.uri(key)}") from exc
        return where.uri(where.key(INDEX))
    folder = where.path
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")  # a crash never leaves a half-written page
        partial.write_bytes(data)
        partial.replace(target)
    return str(folder / INDEX)


def browser_link(location: Location | str, served_at: str | None = None, client: s3.S3Client | None = None) -> str:
    """An http(s) link a person's browser opens, for the report page at `location`:

    - `served_at` (KERNELSWEEP_REPORTS_URL): the base URL of a web server in front of the results'
      `reports/` folder (`kernelsweep fleet demo` runs one; on S3, CloudFront or any static server);
    - an S3 object: a presigned GET URL, valid for PRESIGN_SECONDS (at most as long as the credentials
      that signed it: an instance profile's last hours, not days);
    - otherwise a local file's file:// URL (it opens only on the machine that has the file).
    """
    where = parse_location(location, "report location")
    if served_at:
        relative = str(where).split(f"/{REPORTS_FOLDER}/", 1)[-1]
        return f"{served_at.rstrip('/')}/{quote(relative)}"
    if not isinstance(where, s3.S3Location):
        return where.path.resolve().as_uri()
    client = client or s3.make_client()
    url: str = client.generate_presigned_url(
        "get_object", Params={"Bucket": where.bucket, "Key": where.prefix}, ExpiresIn=PRESIGN_SECONDS
    )
    return url
