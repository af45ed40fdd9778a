"""Trace and compile caches keyed by content, kept in the artifact store.

A NEFF compiled once is reused by any later sweep on any host that shares the store. Keys hash
canonical JSON of exactly what determines the output, with the tool version in both the key and
the entry's path:

    trace:   definition and NKI kernel source sha256s, kernel ref, params, tunables (when set), dtype, platform, lnc,
             tracer id, nki version, compiler version, NKI_COMPILER_FRONTEND, toolchain kind, and
             whether the compile wrote debug info (NKI_DEBUG_INFO: `capture.hotspots`)
    compile: IR sha256, compiler version, target, lnc, compiler flags, tracer id, nki version,
             NKI_COMPILER_FRONTEND

The tracer and the nki version are in both keys because they move independently of the compiler
(nki 0.6.0 ships with neuronx-cc 2.27.x): an nki upgrade must not reuse a NEFF the old one made.
NKI 0.7's NKI_COMPILER_FRONTEND=custom keeps the old specialization, which compiles other IR under
the same versions (addendum F2). `--toolchain cpu` keeps its traces apart from a device host's: its
entries also hold the simulator's model NEFF and nki.simulate's outputs.

An entry is written after the artifacts it names, so an entry that exists is complete. A missing
entry is a miss; so is one that cannot be read or names an artifact the store no longer holds
intact: it is moved aside (with the corrupt IR or NEFF it names, which the run makes again; the
store's quarantine folder keeps both), with a warning, and rebuilt. Bytes a cache entry names that
a run cannot make again (the simulated outputs of `--toolchain cpu`) are left where they are. Any
other store error raises rather than silently recompiling.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kernelsweep.errors import StoreError
from kernelsweep.stores.artifacts import ArtifactRef, ArtifactStore, content_key

CACHE_LAYOUT = "cache-v1"
REBUILDABLE = frozenset({"ir", "neff", "model_neff"})  # what a trace or compile makes again, bit for bit or not
# Stages whose every artifact is computed again from the key alone (kernelsweep.reference: a seeded
# input, the float64 reference): a corrupt one is moved aside and written afresh, never kept.
REMADE_STAGES = frozenset({"inputs", "reference"})

log = logging.getLogger(__name__)


def cache_key(fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def trace_key(
    *,
    kernel_source_sha256: str,
    nki_source_sha256: str | None,
    kernel_ref: str,
    params: dict[str, int],
    dtype: str,
    platform: str,
    lnc: int,
    tracer: str | None,
    nki_version: str | None,
    compiler_version: str | None,
    nki_compiler_frontend: str | None = None,
    toolchain: str = "neuron",
    tunables: Mapping[str, int | str] | None = None,
    debug_info: bool = False,
) -> str:
    """A point's tunables are the NKI kernel's arguments: they change the trace, and so does NKI_DEBUG_INFO
    (each keyed only when set, so the keys of points without them stay as they were)."""
    return cache_key(
        ({"tunables": dict(tunables)} if tunables else {})
        | ({"debug_info": True} if debug_info else {})
        | {
            "nki_compiler_frontend": nki_compiler_frontend,
            "toolchain": toolchain,
            "kernel_source_sha256": kernel_source_sha256,
            "nki_source_sha256": nki_source_sha256,
            "kernel_ref": kernel_ref,
            "params": params,
            "dtype": dtype,
            "platform": platform,
            "lnc": lnc,
            "tracer": tracer,
            "nki_version": nki_version,
            "compiler_version": compiler_version,
        }
    )


def compile_key(
    *,
    ir_sha256: str,
    compiler_version: str | None,
    target: str,
    lnc: int | None,
    flags: list[str],
    tracer: str | None,
    nki_version: str | None,
    nki_compiler_frontend: str | None = None,
) -> str:
    return cache_key(
        {
            "nki_compiler_frontend": nki_compiler_frontend,
            "ir_sha256": ir_sha256,
            "compiler_version": compiler_version,
            "target": target,
            "lnc": lnc,
            "flags": sorted(flags),
            "tracer": tracer,
            "nki_version": nki_version,
        }
    )


def _entry_name(stage: str, version: str | None, key: str) -> str:
    safe_version = re.sub(r"[^a-z0-9._-]+", "-", (version or "unknown").lower())
    return f"{CACHE_LAYOUT}/{stage}/{safe_version}/{key}.json"


@dataclass(frozen=True)
class Entry:
    refs: dict[str, ArtifactRef]
    meta: dict[str, str]


def lookup(store: ArtifactStore, stage: str, version: str | None, key: str) -> Entry | None:
    name = _entry_name(stage, version, key)
    try:
        data = store.get_index(name)
    except IsADirectoryError:  # a folder where the entry belongs
        data = b""
    if data is None:
        return None
    try:
        entry = _entry(json.loads(data))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        _discard(store, name, f"cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
        return None
    for ref_name, ref in entry.refs.items():
        if not store.has(ref):
            if ref_name in REBUILDABLE or stage in REMADE_STAGES:
                store.set_aside(ref)
            _discard(store, name, f"names an artifact ({ref_name!r}) the store no longer holds intact")
            return None
    return entry


def _entry(doc: Any) -> Entry:
    """An entry's fields, each of its type: a ref that names no sha256 digest would name no artifact."""
    refs, meta = doc["refs"], doc["meta"]
    if not isinstance(refs, dict) or not isinstance(meta, dict):
        raise TypeError("refs and meta are not objects")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise TypeError("a meta value is not text")
    checked = {}
    for ref_name, ref in refs.items():
        ref = ArtifactRef(**ref)
        if not (isinstance(ref.uri, str) and isinstance(ref.sha256, str)):
            raise TypeError(f"ref {ref_name!r} is not text")
        try:
            content_key(ref.sha256)
        except StoreError as exc:
            raise ValueError(exc.message) from None
        if type(ref.size_bytes) is not int or ref.size_bytes < 0:
            raise ValueError(f"ref {ref_name!r} has no size")
        checked[ref_name] = ref
    return Entry(refs=checked, meta=meta)


def _discard(store: ArtifactStore, name: str, why: str) -> None:
    log.warning("cache entry %s %s: moved aside, rebuilding it", name, why)
    store.set_aside_index(name)


def record(
    store: ArtifactStore,
    stage: str,
    version: str | None,
    key: str,
    refs: dict[str, ArtifactRef],
    meta: dict[str, str] | None = None,
) -> None:
    doc = {"refs": {name: asdict(ref) for name, ref in refs.items()}, "meta": meta or {}}
    store.put_index(_entry_name(stage, version, key), json.dumps(doc, sort_keys=True).encode())
