"""Fetched artifacts are copies: writing one, even as root (whom permission bits do not stop), leaves the
store's own copy intact."""

from __future__ import annotations

import stat

from kernelsweep.stores.artifacts import LocalArtifactStore


def test_stored_artifacts_are_read_only_and_a_fetched_copy_cannot_change_them(tmp_path):
    source = tmp_path / "file.neff"
    source.write_bytes(b"neff bytes")
    store = LocalArtifactStore(tmp_path / "store")
    ref = store.put_file(source)
    stored = store.root / "sha256" / ref.sha256[:2] / ref.sha256
    assert not stored.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    fetched = store.fetch(ref, tmp_path / "work" / "file.neff")
    again = store.fetch(ref, tmp_path / "work" / "file.neff")  # same name twice: no SameFileError
    assert again == fetched and fetched.read_bytes() == b"neff bytes"
    assert fetched.stat().st_ino != stored.stat().st_ino  # a copy, not a link into the store
    try:
        fetched.write_bytes(b"changed")  # succeeds as root (CI) and where the copy is writable
    except PermissionError:
        pass
    assert stored.read_bytes() == b"neff bytes"
