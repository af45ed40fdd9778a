"""How long report pages are kept: every nightly report leaves one page under `<results>/reports/<id>/`,
and nothing else ever deletes them (the results' own objects are kept, and compacted, instead).

A report folder whose newest file is older than the retention period is deleted whole. The page
just written is never among them, and the rows the pages were made from stay: any report can be
made again from them (`kernelsweep report --results ... --html DIR`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pyarrow import fs

from kernelsweep.errors import StoreError
from kernelsweep.report.publish import REPORTS_FOLDER
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location


def _reports_root(results: Location | str) -> tuple[fs.FileSystem, str]:
    where = parse_location(results, "results location").child(REPORTS_FOLDER)
    if isinstance(where, s3.S3Location):
        return s3.pyarrow_filesystem(where), f"{where.bucket}/{where.prefix}"
    return fs.LocalFileSystem(), str(where.path.resolve())


def prune_reports(results: Location | str, keep_days: int, now: datetime, spare: str | None = None) -> list[str]:
    """Delete the report folders last written more than `keep_days` before `now` (never `spare`, a
    report id); returns the ids deleted."""
    filesystem, root = _reports_root(results)
    try:
        infos = filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise StoreError(f"listing reports under {root}: {exc}", retryable=True) from exc
    newest: dict[str, datetime] = {}
    for info in infos:
        report_id = info.path[len(root) :].strip("/").split("/", 1)[0]
        if info.type == fs.FileType.File and info.mtime is not None and report_id:
            written = info.mtime if info.mtime.tzinfo else info.mtime.astimezone()
            newest[report_id] = max(newest.get(report_id, written), written)
    cutoff = now - timedelta(days=keep_days)
    old = sorted(report_id for report_id, written in newest.items() if written < cutoff and report_id != spare)
    for report_id in old:
        try:
            filesystem.delete_dir(f"{root}/{report_id}")
        except OSError as exc:
            raise StoreError(f"deleting the old report {root}/{report_id}: {exc}") from exc
    return old
