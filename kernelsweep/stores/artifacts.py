"""Content-addressed artifact store: `<root>/sha256/<2 hex>/<sha256>`, in a local folder or on S3.

Every file a point makes (IR, NEFF, inputs, NTFF, profile, outputs) goes in by its hash and comes
out verified, so no step can read another run's overwritten file and every row can name exactly
the bytes behind its numbers. Because the key is the content, a put of bytes already present is a
no-op, and any store holding the hash can serve a ref, whichever host wrote it.

Reading never destroys evidence: bytes that no longer hash to their name (a disk error, an edit) are
reported, with a warning, and left where they are, since a past row's capture, profile or outputs
can never be made again. Only a caller that will make the bytes again (a run, for its IR, NEFF and
inputs, `fetch(..., rebuildable=True)`; the caches, for what they name) has them moved aside to
`<root>/quarantine/` (`set_aside`), where they stay for inspection, so the next put writes them
afresh. A fetch copies by default: a fetched file is the caller's to change. A stage whose tools only
read their inputs asks for `read_only`, and a local store then places a symbolic link to its own
verified, read-only file (as a build sandbox links its inputs) instead of copying megabytes per point;
a stage done with a tool's output hands it over with `take`, and a local store moves it in when it can.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from boto3.exceptions import Boto3Error
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.errors import StoreError
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

CHUNK_BYTES = 1 << 20
MIB = 1 << 20
# An NTFF can be ~200 MB: above 64 MiB, upload 16 MiB parts in parallel; part failures retry alone.
DEFAULT_TRANSFER = TransferConfig(multipart_threshold=64 * MIB, multipart_chunksize=16 * MIB, max_concurrency=8)
_HASH = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_PATH = re.compile(r"/sha256/[0-9a-f]{2}/[0-9a-f]{64}$")
_BOTO_ERRORS = (BotoCoreError, ClientError, Boto3Error)
QUARANTINE = "quarantine"  # `<root>/quarantine/<what>.<time>.corrupt`: bytes set aside, kept for inspection

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArtifactRef:
    uri: str
    sha256: str
    size_bytes: int


class ArtifactStore(Protocol):
    """What the stages need: put a file by content, fetch a ref's verified bytes under a chosen name."""

    def put_file(self, path: Path, *, take: bool = False) -> ArtifactRef:
        """`take`: the caller is done with `path` (a tool's output in a scratch folder), which may be
        moved into the store rather than copied."""

    def fetch(self, ref: ArtifactRef, dest: Path, *, rebuildable: bool = False, read_only: bool = False) -> Path:
        """The ref's verified bytes at `dest`; corrupt ones are moved aside only when `rebuildable`.
        `read_only`: the caller only reads `dest`, which may then be a link to the store's own file."""

    def has(self, ref: ArtifactRef) -> bool:
        """Whether the store holds the ref's bytes intact (what it holds broken is reported, not touched)."""

    def set_aside(self, ref: ArtifactRef) -> str | None:
        """Move the ref's bytes to the quarantine folder (a run makes them again); where they went."""

    def set_aside_index(self, name: str) -> None:
        """Move a named object (a cache entry found broken) to the quarantine folder."""

    def put_index(self, name: str, data: bytes) -> None:
        """A small named object (a cache entry) under `<root>/index/`; written last, after its artifacts."""

    def get_index(self, name: str) -> bytes | None:
        """The named object, or None only when it does not exist (any other failure raises)."""


_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9._/-]*$")


def index_key(name: str) -> str:
    if not _INDEX_NAME.match(name) or ".." in name:
        raise StoreError(f"index name {name!r} must be lowercase [a-z0-9._/-] without '..'")
    return f"index/{name}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def content_key(sha256: str) -> str:
    """The store-relative key; refuses anything but a hex digest so a ref can never name another path."""
    if not _HASH.match(sha256):
        raise StoreError(f"artifact hash {sha256[:80]!r} is not a sha256 hex digest")
    return f"sha256/{sha256[:2]}/{sha256}"


def _corrupt(ref: ArtifactRef, where: str, moved_to: str | None) -> StoreError:
    """Said once, where it was found."""
    fate = (
        f"moved aside to {moved_to}; the next run makes it again"
        if moved_to
        else "left in place (nothing can make it again: its row's lineage no longer verifies)"
    )
    problem = "is corrupt (hash mismatch: its bytes no longer hash to its name)"
    message = f"artifact {ref.sha256[:12]} at {where} {problem}: {fate}"
    log.warning(message)
    return StoreError(message, error_class="CorruptArtifact")


def _aside_name(what: str) -> str:
    return f"{QUARANTINE}/{what}.{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}.corrupt"


def _stamp(path: Path) -> tuple[int, ...]:
    """What changes whenever a file's bytes can have changed: its inode, size, and modification and
    change times (no user-space call sets the change time)."""
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class LocalArtifactStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        # sha256 -> the stamp of its file when this store wrote it or last hashed it intact: a fetch of
        # a file unchanged since copies it without hashing the copy again (a point's inputs, NEFF and
        # captures are fetched by two or three stages, megabytes each)
        self._intact: dict[str, tuple[int, ...]] = {}

    def _path(self, sha256: str) -> Path:
        return self.root / content_key(sha256)

    def put_file(self, path: Path, *, take: bool = False) -> ArtifactRef:
        """Idempotent: a file already present (at its size) is not written again. A taken file is
        renamed into place when it is a plain file of this file system with no other name (a link
        elsewhere would let its other name change the artifact); anything else is copied."""
        sha = sha256_file(path)
        target = self._path(sha)
        size = path.stat().st_size
        if not (target.is_file() and target.stat().st_size == size):  # absent, or truncated: (re)write
            target.parent.mkdir(parents=True, exist_ok=True)
            if not (take and self._moved(path, target)):
                fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
                os.close(fd)
                shutil.copyfile(path, tmp)
                os.chmod(tmp, 0o444)
                os.replace(tmp, target)  # atomic: readers never see a partial artifact
            self._intact[sha] = _stamp(target)
        return ArtifactRef(uri=target.as_uri(), sha256=sha, size_bytes=size)

    @staticmethod
    def _moved(path: Path, target: Path) -> bool:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_dev != target.parent.stat().st_dev:
            return False
        try:
            os.chmod(path, 0o444)
            os.replace(path, target)  # one rename: atomic, as the copy's
        except OSError:  # another user's file; another mount of the same device (a bind mount)
            return False
        return True

    def fetch(self, ref: ArtifactRef, dest: Path, *, rebuildable: bool = False, read_only: bool = False) -> Path:
        """An artifact at `dest` (tools need their own file names), verified unless this store wrote or
        verified the file and it has not changed since; bytes found corrupt are moved aside when
        `rebuildable`, else left in place. A copy, or for `read_only` a link to the verified file."""
        source = self._path(ref.sha256)
        if not source.is_file():
            raise StoreError(f"artifact {ref.sha256[:12]} is missing from {self.root}")
        stamp = _stamp(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)  # never write through whatever is there (an old link, say)
        if read_only:
            self._verify(ref, source, stamp, rebuildable)
            dest.symlink_to(source)
            return dest
        shutil.copyfile(source, dest)
        unchanged = _stamp(source) == stamp
        if unchanged and self._intact.get(ref.sha256) == stamp:
            return dest
        if sha256_file(dest) != ref.sha256:
            dest.unlink(missing_ok=True)
            if sha256_file(source) != ref.sha256:  # the store's copy, not ours, is the broken one
                raise _corrupt(ref, str(source), self.set_aside(ref) if rebuildable else None)
            raise StoreError(f"artifact {ref.sha256[:12]} changed while it was copied to {dest}; try again")
        if unchanged:
            self._intact[ref.sha256] = stamp
        return dest

    def _verify(self, ref: ArtifactRef, source: Path, stamp: tuple[int, ...], rebuildable: bool) -> None:
        """The store's own file hashed, unless it is unchanged since this store last knew it intact."""
        if self._intact.get(ref.sha256) == stamp:
            return
        if sha256_file(source) != ref.sha256:
            raise _corrupt(ref, str(source), self.set_aside(ref) if rebuildable else None)
        if _stamp(source) != stamp:
            raise StoreError(f"artifact {ref.sha256[:12]} changed while it was verified at {source}; try again")
        self._intact[ref.sha256] = stamp

    def has(self, ref: ArtifactRef) -> bool:
        source = self._path(ref.sha256)
        if not source.is_file():
            return False
        if self._intact.get(ref.sha256) == _stamp(source):
            return True
        if sha256_file(source) != ref.sha256:
            log.warning(
                "artifact %s at %s is corrupt (hash mismatch: its bytes no longer hash to its name)",
                ref.sha256[:12],
                source,
            )
            return False
        return True

    def set_aside(self, ref: ArtifactRef) -> str | None:
        return self._move_aside(content_key(ref.sha256), ref.sha256)

    def set_aside_index(self, name: str) -> None:
        self._move_aside(index_key(name), name.replace("/", "_"))

    def _move_aside(self, key: str, what: str) -> str | None:
        target = self.root / _aside_name(what)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(self.root / key, target)
        except FileNotFoundError:
            return None
        return str(target)

    def put_index(self, name: str, data: bytes) -> None:
        target = self.root / index_key(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)

    def get_index(self, name: str) -> bytes | None:
        try:
            return (self.root / index_key(name)).read_bytes()
        except FileNotFoundError:
            return None


class S3ArtifactStore:
    """The same layout under `s3://bucket/prefix`; `client` is public so callers can share or observe it."""

    def __init__(
        self, location: s3.S3Location, *, client: s3.S3Client | None = None, transfer: TransferConfig = DEFAULT_TRANSFER
    ) -> None:
        self.location = location
        self.client = client or s3.make_client()
        self.transfer = transfer

    def _key(self, sha256: str) -> str:
        return self.location.key(content_key(sha256))

    def _exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.location.bucket, Key=key)
        except ClientError as exc:
            if s3.error_code(exc) in ("404", "NoSuchKey"):
                return False
            raise
        return True

    def put_file(self, path: Path, *, take: bool = False) -> ArtifactRef:
        """Idempotent: one HEAD, and an upload (multipart when large) only if the hash is not there yet
        (`take` changes nothing: an upload copies)."""
        sha = sha256_file(path)
        key = self._key(sha)
        try:
            if not self._exists(key):
                extra = {"Metadata": {"sha256": sha}, "ChecksumAlgorithm": "SHA256"}
                self.client.upload_file(str(path), self.location.bucket, key, ExtraArgs=extra, Config=self.transfer)
        except _BOTO_ERRORS as exc:
            raise s3.translate(exc, f"storing artifact {sha[:12]} at {self.location.uri(key)}") from exc
        return ArtifactRef(uri=self.location.uri(key), sha256=sha, size_bytes=path.stat().st_size)

    def fetch(self, ref: ArtifactRef, dest: Path, *, rebuildable: bool = False, read_only: bool = False) -> Path:
        """Download next to `dest` under a hidden name, verify, then rename: `dest` is whole or absent
        (a download is a copy, `read_only` or not)."""
        key = self._key(ref.sha256)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".incoming-")
        os.close(fd)
        try:
            self.client.download_file(self.location.bucket, key, tmp, Config=self.transfer)
            if sha256_file(Path(tmp)) != ref.sha256:
                raise _corrupt(ref, self.location.uri(key), self.set_aside(ref) if rebuildable else None)
            os.replace(tmp, dest)
        except ClientError as exc:
            if s3.error_code(exc) in ("404", "NoSuchKey"):
                raise StoreError(f"artifact {ref.sha256[:12]} is missing from {self.location.uri(key)}") from exc
            raise s3.translate(exc, f"fetching artifact {ref.sha256[:12]}") from exc
        except _BOTO_ERRORS as exc:
            raise s3.translate(exc, f"fetching artifact {ref.sha256[:12]}") from exc
        finally:
            Path(tmp).unlink(missing_ok=True)
        return dest

    def has(self, ref: ArtifactRef) -> bool:
        """One HEAD: S3 checks each upload's checksum, so its objects do not rot; present is intact."""
        key = self._key(ref.sha256)
        try:
            return self._exists(key)
        except _BOTO_ERRORS as exc:
            raise s3.translate(exc, f"checking artifact {ref.sha256[:12]}") from exc

    def set_aside(self, ref: ArtifactRef) -> str | None:
        """Copied to the quarantine prefix, then deleted; without s3:DeleteObject it stays (and is said)."""
        return self._move_aside(content_key(ref.sha256), ref.sha256)

    def set_aside_index(self, name: str) -> None:
        self._move_aside(index_key(name), name.replace("/", "_"))

    def _move_aside(self, key: str, what: str) -> str | None:
        source, target = self.location.key(key), self.location.key(_aside_name(what))
        try:
            self.client.copy_object(
                Bucket=self.location.bucket, Key=target, CopySource={"Bucket": self.location.bucket, "Key": source}
            )
            self.client.delete_object(Bucket=self.location.bucket, Key=source)
        except _BOTO_ERRORS as exc:
            log.warning("could not move %s aside: %s", self.location.uri(source), " ".join(str(exc).split()))
            return None
        return self.location.uri(target)

    def put_index(self, name: str, data: bytes) -> None:
        key = self.location.key(index_key(name))
        try:
            self.client.put_object(Bucket=self.location.bucket, Key=key, Body=data)
        except _BOTO_ERRORS as exc:
            raise s3.translate(exc, f"writing index {name}") from exc

    def get_index(self, name: str) -> bytes | None:
        key = self.location.key(index_key(name))
        try:
            return self.client.get_object(Bucket=self.location.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if s3.error_code(exc) in ("404", "NoSuchKey"):
                return None
            raise s3.translate(exc, f"reading index {name}") from exc
        except _BOTO_ERRORS as exc:
            raise s3.translate(exc, f"reading index {name}") from exc


def open_artifact_store(location: Location | str) -> ArtifactStore:
    """A folder or an S3 bucket and prefix."""
    where = parse_location(location, "artifact store location")
    if isinstance(where, s3.S3Location):
        return S3ArtifactStore(where)
    return LocalArtifactStore(where.path)


def open_store_for(ref: ArtifactRef) -> ArtifactStore:
    """The store a ref was written to, e.g. to verify a row's artifacts from another host."""
    parts = urlsplit(ref.uri)
    if not _CONTENT_PATH.search(parts.path):
        raise StoreError(f"{ref.uri!r} is not a content-addressed artifact URI")
    root = _CONTENT_PATH.sub("", parts.path)
    if parts.scheme == "s3":
        return S3ArtifactStore(s3.S3Location(parts.netloc, root.strip("/")))
    if parts.scheme == "file":
        return LocalArtifactStore(unquote(root))
    raise StoreError(f"{ref.uri!r}: artifact URIs are s3:// or file://")
