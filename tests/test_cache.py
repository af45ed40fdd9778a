"""Content-keyed trace/compile caches: what changes a key, and entries in both stores."""

from __future__ import annotations

import pytest

from kernelsweep.errors import StoreError
from kernelsweep.stores import cache
from kernelsweep.stores.artifacts import LocalArtifactStore, S3ArtifactStore
from kernelsweep.stores.s3 import make_client, parse_s3_uri

COMPILE = dict(
    ir_sha256="a" * 64, compiler_version="2.21.0", target="trn2", lnc=2, flags=["-O2", "--auto-cast=none"],
    tracer="legacy-penguin", nki_version="neuronxcc.nki 2.21.0",
)  # fmt: skip
TRACE = dict(
    kernel_source_sha256="b" * 64,
    nki_source_sha256="d" * 64,
    kernel_ref="m:k",
    params={"s": 128, "h": 1024},
    dtype="bfloat16",
    platform="trn2",
    lnc=2,
    tracer="nki.compiler.driver",
    nki_version="0.6.0",
    compiler_version="2.27.5334.0",
)


@pytest.mark.parametrize(
    "change",
    [
        {"ir_sha256": "c" * 64},
        {"compiler_version": "2.22.0"},
        {"target": "trn1"},
        {"lnc": 1},
        {"flags": ["-O3"]},
        {"tracer": "neuronxcc.nki_standalone"},
        {"nki_version": "0.5.0"},
        {"nki_compiler_frontend": "custom"},  # NKI 0.7's old specialization: other IR, same versions
    ],
)
def test_compile_key_changes_with_everything_that_shapes_the_neff(change):
    assert cache.compile_key(**COMPILE) != cache.compile_key(**{**COMPILE, **change})


def test_compile_key_ignores_flag_order():
    assert cache.compile_key(**COMPILE) == cache.compile_key(**{**COMPILE, "flags": list(reversed(COMPILE["flags"]))})


@pytest.mark.parametrize(
    "change",
    [
        {"kernel_source_sha256": "c" * 64},
        {"kernel_ref": "m:other"},
        {"params": {"s": 256, "h": 1024}},
        {"dtype": "float32"},
        {"platform": "inf2"},
        {"lnc": 1},
        {"nki_source_sha256": "e" * 64},  # the NKI kernel's own file, not just the definition's
        {"tracer": "nki.compiler.frontend"},
        {"tracer": "nki.compiler.driver/no-output-names"},  # another signature variant of the same API
        {"nki_version": "0.6.1"},  # nki moves without the compiler (0.6.0 ships with neuronx-cc 2.27.x)
        {"compiler_version": "2.28.0"},
        {"nki_compiler_frontend": "custom"},
        {"toolchain": "cpu"},  # its entries also hold the model NEFF and nki.simulate's outputs
    ],
)
def test_trace_key_changes_with_everything_that_shapes_the_ir(change):
    assert cache.trace_key(**TRACE) != cache.trace_key(**{**TRACE, **change})


def test_trace_key_ignores_param_order():
    assert cache.trace_key(**TRACE) == cache.trace_key(**{**TRACE, "params": {"h": 1024, "s": 128}})


def _round_trip(store, tmp_path):
    neff = tmp_path / "file.neff"
    neff.write_bytes(b"a neff")
    ref = store.put_file(neff)  # an entry is a hit only while the store holds what it names
    assert cache.lookup(store, "compile", "2.21.0+sim", "k1") is None
    cache.record(store, "compile", "2.21.0+sim", "k1", {"neff": ref}, {"tracer": "t"})
    entry = cache.lookup(store, "compile", "2.21.0+sim", "k1")
    assert entry.refs == {"neff": ref} and entry.meta == {"tracer": "t"}
    assert cache.lookup(store, "compile", "2.22.0", "k1") is None  # the tool version scopes the entry


def test_entries_in_a_local_store(tmp_path):
    _round_trip(LocalArtifactStore(tmp_path / "store"), tmp_path)


def test_entries_in_an_s3_store(monkeypatch, tmp_path):
    from s3_server import apply_env, aws_test_env, create_bucket, moto_s3

    with moto_s3() as endpoint:
        apply_env(monkeypatch, aws_test_env(endpoint))
        bucket = create_bucket(endpoint)
        _round_trip(S3ArtifactStore(parse_s3_uri(f"s3://{bucket}/store"), client=make_client()), tmp_path)


def test_index_names_cannot_escape_the_store(tmp_path):
    with pytest.raises(StoreError):
        LocalArtifactStore(tmp_path).put_index("../outside", b"x")
