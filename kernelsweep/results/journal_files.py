"""Where a run's journal lives: `<results>/_journal`, in a folder or under an S3 prefix.

Four operations and a put that never replaces (`put_new`), each failure a StoreError naming the
place. A local entry is written under a hidden name, fsync'd and renamed (linked, for `put_new`: a
link fails where the name exists), so it is whole or absent even when the disk fills up; an S3 entry
is one PutObject (conditional on no object, `If-None-Match: *`, for `put_new`). Used by
kernelsweep.results.journal, which says what goes in.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.errors import StoreError
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

JOURNAL_FOLDER = "_journal"
READ_LIMIT_BYTES = (16 << 20) + 1  # a row is a few KiB; reading more would only show it is not one


class JournalFiles(Protocol):
    """The four operations a journal needs, on a folder or under an S3 prefix."""

    def put(self, name: str, data: bytes) -> None: ...

    def put_new(self, name: str, data: bytes) -> bool:
        """Writes `name` only where there is none, atomically: False (nothing written) when one exists."""
        ...

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
        self._write(name, data, os.replace)

    def put_new(self, name: str, data: bytes) -> bool:
        try:
            self._write(name, data, os.link)  # a hard link, unlike a rename, never replaces the name
        except StoreError as exc:
            if isinstance(exc.__cause__, FileExistsError):
                return False
            raise
        return True

    def _write(self, name: str, data: bytes, place: Callable[[str, Path], None]) -> None:
        target = self.root / name
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            place(tmp, target)
        except OSError as exc:
            raise _folder_error(target, "writing", exc) from exc
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def get(self, name: str) -> bytes | None:
        try:
            with (self.root / name).open("rb") as handle:
                return handle.read(READ_LIMIT_BYTES)
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
            if path.is_dir() and not path.is_symlink():  # a folder where an object belongs (run.json/)
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
            folders.update(p for p in path.parents if p == self.root or self.root in p.parents)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            try:
                folder.rmdir()
            except OSError:  # not empty (another run's, or a leftover temp file): leave it
                pass


def _folder_error(path: Path, action: str, exc: OSError) -> StoreError:
    reason = exc.strerror or str(exc) or type(exc).__name__
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

    def put_new(self, name: str, data: bytes) -> bool:
        try:
            self.client.put_object(Bucket=self.where.bucket, Key=self.where.key(name), Body=data, IfNoneMatch="*")
        except ClientError as exc:
            if s3.error_code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return False
            raise s3.translate(exc, f"writing {self.uri(name)}") from exc
        except BotoCoreError as exc:
            raise s3.translate(exc, f"writing {self.uri(name)}") from exc
        return True

    def get(self, name: str) -> bytes | None:
        try:
            response = self.client.get_object(
                Bucket=self.where.bucket, Key=self.where.key(name), Range=f"bytes=0-{READ_LIMIT_BYTES - 1}"
            )
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


def open_files(
    results: Location | str, client: s3.S3Client | None = None, folder: str = JOURNAL_FOLDER
) -> JournalFiles:
    """`<results>/_journal` (or another folder beside the results), in a folder or under the results'
    S3 prefix."""
    where = parse_location(results, "results location").child(folder)
    if isinstance(where, s3.S3Location):
        return _S3Files(where, client or s3.make_client())
    return _LocalFiles(where.path)
