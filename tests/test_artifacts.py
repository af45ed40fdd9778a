"""Content-addressed artifact store, in a folder and on moto's S3 server over HTTP."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from s3_server import FaultProxy, list_keys, record_operations

from kernelsweep.errors import StoreError, UsageError
from kernelsweep.stores import s3
from kernelsweep.stores.artifacts import (
    ArtifactRef,
    LocalArtifactStore,
    S3ArtifactStore,
    open_artifact_store,
    open_store_for,
)

MIB = 1 << 20
SMALL_PARTS = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)  # S3's minimum part


@pytest.fixture
def payload(tmp_path) -> Path:
    path = tmp_path / "file.neff"
    path.write_bytes(b"NEFF" + os.urandom(4096))
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- local ---------------------------------------------------------------------------------------


def test_local_put_is_content_addressed_and_idempotent(tmp_path, payload):
    store = LocalArtifactStore(tmp_path / "store")
    ref = store.put_file(payload)
    sha = _sha(payload)
    target = tmp_path / "store" / "sha256" / sha[:2] / sha
    assert ref == ArtifactRef(uri=target.as_uri(), sha256=sha, size_bytes=payload.stat().st_size)
    before = target.stat()
    assert store.put_file(payload) == ref
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_local_fetch_verifies_the_hash(tmp_path, payload):
    store = LocalArtifactStore(tmp_path / "store")
    ref = store.put_file(payload)
    assert store.fetch(ref, tmp_path / "work" / "x.neff").read_bytes() == payload.read_bytes()

    stored = Path(ref.uri.removeprefix("file://"))
    stored.chmod(0o644)  # the store keeps artifacts read-only
    stored.write_bytes(b"bit rot")
    with pytest.raises(StoreError, match="corrupt"):
        store.fetch(ref, tmp_path / "work2" / "x.neff")
    assert not (tmp_path / "work2" / "x.neff").exists()


def test_local_fetch_hashes_once_what_is_unchanged_and_again_what_was_rewritten(tmp_path, payload, monkeypatch):
    """A point's artifacts are fetched by several stages: the bytes this store wrote or verified are not
    hashed again while their file is unchanged, and a rewrite of the same size is still found corrupt."""
    from kernelsweep.stores import artifacts

    hashed: list[Path] = []
    monkeypatch.setattr(artifacts, "sha256_file", lambda path: hashed.append(path) or _sha(path))
    store = LocalArtifactStore(tmp_path / "store")
    ref = store.put_file(payload)
    for n in range(3):
        assert store.fetch(ref, tmp_path / f"work{n}" / "x.neff").read_bytes() == payload.read_bytes()
    assert store.has(ref)
    assert hashed == [payload]  # the put's, only
    stored = Path(ref.uri.removeprefix("file://"))
    stored.chmod(0o644)
    stored.write_bytes(bytes(b ^ 1 for b in payload.read_bytes()))  # same size, other bytes
    with pytest.raises(StoreError, match="corrupt"):
        store.fetch(ref, tmp_path / "work9" / "x.neff")
    assert not store.has(ref)


def test_a_read_only_fetch_links_the_verified_file_and_refuses_a_corrupt_one(tmp_path, payload, monkeypatch):
    """A tool's input need not be copied: the link leads to the store's own read-only file, hashed
    once while unchanged, and the link replaces whatever held the name (never written through)."""
    from kernelsweep.stores import artifacts

    hashed: list[Path] = []
    monkeypatch.setattr(artifacts, "sha256_file", lambda path: hashed.append(path) or _sha(path))
    store = LocalArtifactStore(tmp_path / "store")
    ref = store.put_file(payload)
    stored = Path(ref.uri.removeprefix("file://"))
    dest = tmp_path / "work" / "x.neff"
    dest.parent.mkdir()
    dest.write_bytes(b"an older file of that name")
    for _ in range(2):
        assert store.fetch(ref, dest, read_only=True) == dest
        assert dest.is_symlink() and dest.resolve() == stored and dest.read_bytes() == payload.read_bytes()
    assert hashed == [payload]  # the put's, only
    assert stored.stat().st_mode & 0o777 == 0o444

    stored.chmod(0o644)
    stored.write_bytes(bytes(b ^ 1 for b in payload.read_bytes()))  # same size, other bytes
    with pytest.raises(StoreError, match="corrupt.*moved aside"):
        store.fetch(ref, tmp_path / "work2" / "x.neff", rebuildable=True, read_only=True)
    assert not (tmp_path / "work2" / "x.neff").exists() and not stored.exists()


def test_a_taken_file_is_moved_in_only_when_nothing_else_names_it(tmp_path, payload):
    """A tool's output the stage is done with is renamed into the store (no copy of megabytes); a file
    with a second name, or a link, is copied, so no other name can change an artifact."""
    store = LocalArtifactStore(tmp_path / "store")
    ref = store.put_file(payload, take=True)
    stored = Path(ref.uri.removeprefix("file://"))
    assert not payload.exists() and ref.sha256 == _sha(stored) and stored.stat().st_mode & 0o777 == 0o444
    assert store.fetch(ref, tmp_path / "back.neff").read_bytes() == stored.read_bytes()

    twice = tmp_path / "twice.bin"
    twice.write_bytes(os.urandom(1024))
    os.link(twice, tmp_path / "other-name.bin")
    linked = tmp_path / "link.bin"
    linked.symlink_to(tmp_path / "other-name.bin")
    for path in (twice, linked):
        taken = Path(store.put_file(path, take=True).uri.removeprefix("file://"))
        assert path.exists() and taken.stat().st_ino != (tmp_path / "other-name.bin").stat().st_ino
    (tmp_path / "other-name.bin").write_bytes(b"changed under its other name")
    assert _sha(taken) == Path(taken).name  # the store's copy did not change with it


def test_local_fetch_of_missing_or_forged_refs(tmp_path):
    store = LocalArtifactStore(tmp_path / "store")
    with pytest.raises(StoreError, match="missing"):
        store.fetch(ArtifactRef("file:///x", "ab" * 32, 1), tmp_path / "x")
    with pytest.raises(StoreError, match="not a sha256"):
        store.fetch(ArtifactRef("file:///x", "../../etc/passwd", 1), tmp_path / "x")


# --- S3 ------------------------------------------------------------------------------------------


def test_s3_put_is_idempotent_and_records_the_hash(bucket, moto_endpoint, payload):
    store = open_artifact_store(f"s3://{bucket}/artifacts")
    assert isinstance(store, S3ArtifactStore)
    sent = record_operations(store.client)
    ref = store.put_file(payload)
    sha = _sha(payload)
    assert ref == ArtifactRef(f"s3://{bucket}/artifacts/sha256/{sha[:2]}/{sha}", sha, payload.stat().st_size)
    assert store.put_file(payload) == ref
    assert sent == ["HeadObject", "PutObject", "HeadObject"]  # the second put uploads nothing
    head = boto3.client("s3", endpoint_url=moto_endpoint).head_object(
        Bucket=bucket, Key=f"artifacts/sha256/{sha[:2]}/{sha}"
    )
    assert head["Metadata"] == {"sha256": sha}
    assert list_keys(moto_endpoint, bucket) == [f"artifacts/sha256/{sha[:2]}/{sha}"]


def test_s3_large_file_goes_multipart_and_round_trips(bucket, moto_endpoint, tmp_path):
    big = tmp_path / "profile.ntff"
    big.write_bytes(os.urandom(12 * MIB))
    store = S3ArtifactStore(s3.parse_s3_uri(f"s3://{bucket}/a"), transfer=SMALL_PARTS)
    sent = record_operations(store.client)
    ref = store.put_file(big)
    uploads = [op for op in sent if op != "HeadObject"]
    assert uploads[0] == "CreateMultipartUpload" and uploads[-1] == "CompleteMultipartUpload"
    assert uploads.count("UploadPart") == 3 and "PutObject" not in uploads
    key = f"a/sha256/{ref.sha256[:2]}/{ref.sha256}"
    head = boto3.client("s3", endpoint_url=moto_endpoint).head_object(Bucket=bucket, Key=key)
    assert head["ETag"].endswith('-3"') and head["Metadata"] == {"sha256": ref.sha256}
    fetched = store.fetch(ref, tmp_path / "out" / "profile.ntff")
    assert _sha(fetched) == _sha(big)


def test_s3_part_upload_failure_is_retried(bucket, moto_endpoint, tmp_path):
    big = tmp_path / "profile.ntff"
    big.write_bytes(os.urandom(11 * MIB))
    with FaultProxy(moto_endpoint) as proxy:
        proxy.fail_next("PUT", status=503, code="SlowDown")  # the first part
        store = S3ArtifactStore(s3.S3Location(bucket, "a"), client=s3.make_client(proxy.url), transfer=SMALL_PARTS)
        ref = store.put_file(big)
        assert _sha(store.fetch(ref, tmp_path / "out.ntff")) == ref.sha256
    assert [status for method, _, status in proxy.log if method == "PUT"].count(503) == 1


def test_s3_fetch_verifies_the_hash(bucket, moto_endpoint, payload, tmp_path):
    store = open_artifact_store(f"s3://{bucket}/artifacts")
    ref = store.put_file(payload)
    key = ref.uri.removeprefix(f"s3://{bucket}/")
    boto3.client("s3", endpoint_url=moto_endpoint).put_object(Bucket=bucket, Key=key, Body=b"overwritten")
    dest = tmp_path / "work" / "file.neff"
    with pytest.raises(StoreError, match="corrupt"):
        store.fetch(ref, dest)
    assert list(dest.parent.iterdir()) == []  # neither the bad bytes nor the temp file are left behind


def test_s3_fetch_of_a_missing_artifact(bucket, tmp_path):
    store = open_artifact_store(f"s3://{bucket}/artifacts")
    with pytest.raises(StoreError, match="missing") as caught:
        store.fetch(ArtifactRef("s3://x", "cd" * 32, 1), tmp_path / "x")
    assert caught.value.retryable is False


def test_open_store_for_a_ref_finds_its_store(bucket, tmp_path, payload):
    for location in (f"s3://{bucket}/deep/prefix", str(tmp_path / "store")):
        ref = open_artifact_store(location).put_file(payload)
        dest = tmp_path / "fetched" / location.replace("/", "_")
        assert open_store_for(ref).fetch(ref, dest).read_bytes() == payload.read_bytes()
    with pytest.raises(StoreError):
        open_store_for(ArtifactRef("s3://bucket/not/content/addressed", "ab" * 32, 1))


@pytest.mark.parametrize("location", ["http://example.com/artifacts", "s3://Bad_Bucket/x", "s3://"])
def test_unsupported_locations_are_usage_errors(location):
    with pytest.raises(UsageError):
        open_artifact_store(location)
