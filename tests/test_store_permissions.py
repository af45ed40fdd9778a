"""Fetched artifacts are hard links into the store: the store's copy must not be writable through them."""

from __future__ import annotations

import os
import stat

from kernelsweep.artifacts import LocalArtifactStore


def test_stored_artifacts_are_read_only_and_refetch_replaces_the_link(tmp_path):
    source = tmp_path / "file.neff"
    source.write_bytes(b"neff bytes")
    store = LocalArtifactStore(tmp_path / "store")
    ref = store.put_file(source)
    stored = store.root / "sha256" / ref.sha256[:2] / ref.sha256
    assert not stored.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    fetched = store.fetch(ref, tmp_path / "work" / "file.neff")
    again = store.fetch(ref, tmp_path / "work" / "file.neff")  # same name twice: no SameFileError
    assert again == fetched and fetched.read_bytes() == b"neff bytes"
    if os.geteuid() != 0:  # root ignores permission bits
        try:
            fetched.write_bytes(b"changed")
        except PermissionError:
            pass
        assert stored.read_bytes() == b"neff bytes"
