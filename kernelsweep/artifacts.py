"""Content-addressed artifact store: `<root>/sha256/<2 hex>/<sha256>`.

Every file a point makes (IR, NEFF, inputs, NTFF, profile, outputs) goes in by its hash and comes
out verified, so no step can read another run's overwritten file and every row can name exactly
the bytes behind its numbers.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import StoreError, UsageError

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class ArtifactRef:
    uri: str
    sha256: str
    size_bytes: int


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


class LocalArtifactStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def _path(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256

    def put_file(self, path: Path) -> ArtifactRef:
        """Idempotent: a file already present is not written again."""
        sha = sha256_file(path)
        target = self._path(sha)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
            os.close(fd)
            shutil.copyfile(path, tmp)
            os.replace(tmp, target)  # atomic: readers never see a partial artifact
        return ArtifactRef(uri=target.as_uri(), sha256=sha, size_bytes=target.stat().st_size)

    def fetch(self, ref: ArtifactRef, dest: Path) -> Path:
        """Materialise an artifact at `dest` (tools need their own file names), verifying its hash."""
        source = self._path(ref.sha256)
        if not source.is_file():
            raise StoreError(f"artifact {ref.sha256[:12]} is missing from {self.root}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, dest)
        except OSError:
            shutil.copyfile(source, dest)
        if sha256_file(dest) != ref.sha256:
            raise StoreError(f"artifact {ref.sha256[:12]} at {source} is corrupt (hash mismatch)")
        return dest


def open_artifact_store(location: str) -> LocalArtifactStore:
    if "://" in location:
        raise UsageError(f"artifact store {location!r}: only local folders are supported so far; use a path")
    return LocalArtifactStore(location)
