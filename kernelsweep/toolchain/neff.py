"""The NEFF container: a 1024-byte header followed by a gzipped tar (reference section 6, Corrections 8).

The header layout is the one in leanprover/KLR's `NEFF/Basic.lean` (Amazon-authored): hash u8[64] at
172, uuid u8[32] at 236, name char[256] at 268, requested_tpb_count u32 at 524, tpb_per_node u8[64]
at 528; there is no lnc field. `packaging_version` 1 means tgz + sha256. The same reader serves real
and simulated NEFFs, which is why the simulator writes this exact shape: versions and input/output
names are pulled out of any NEFF by one code path. The output order in sg00/def.json is what maps a
runtime's saved outputs back to a kernel's outputs when their names differ.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import struct
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kernelsweep.errors import CompileError

HEADER_SIZE = 1024
PACKAGING_TGZ_SHA256 = 1
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
OFF_PKG_VERSION, OFF_HEADER_SIZE, OFF_DATA_SIZE = 0, 8, 16
OFF_VERSION_MAJOR, OFF_VERSION_MINOR, OFF_BUILD_VERSION = 24, 32, 40
OFF_NUM_TPB, OFF_HASH, OFF_UUID, OFF_NAME = 168, 172, 236, 268
OFF_REQUESTED_TPB, OFF_TPB_PER_NODE = 524, 528
HASH_BYTES, UUID_BYTES, NAME_BYTES, BUILD_BYTES = 64, 32, 256, 128


class NeffFormatError(CompileError, ValueError):
    """A file that is not a NEFF the compiler could have written: the compile's product is unusable."""


@dataclass(frozen=True)
class NeffInfo:
    packaging_version: int
    version: tuple[int, int]
    build_version: str
    name: str
    num_tpb: int
    requested_tpb_count: int
    info: dict
    neff: dict
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # in the NEFF's order


def write_neff(
    path: Path,
    *,
    name: str,
    info: dict,
    neff: dict,
    variables: dict[str, dict],
    build_version: str,
    extra: dict[str, dict] | None = None,
) -> None:
    """Write header + tgz(info.json, neff.json, sg00/def.json, then `extra` members such as
    kernel_debug_info.json); `variables` in the NEFF's order."""
    raw = io.BytesIO()
    members = [("info.json", info), ("neff.json", neff), ("sg00/def.json", {"var": variables}), *(extra or {}).items()]
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed, tarfile.open(fileobj=packed, mode="w") as tar:
        for member, doc in members:
            data = json.dumps(doc).encode()
            entry = tarfile.TarInfo(member)  # mtime 0: the same inputs make the same bytes
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    data = raw.getvalue()
    header = bytearray(HEADER_SIZE)
    _U64.pack_into(header, OFF_PKG_VERSION, PACKAGING_TGZ_SHA256)
    _U64.pack_into(header, OFF_HEADER_SIZE, HEADER_SIZE)
    _U64.pack_into(header, OFF_DATA_SIZE, len(data))
    _U64.pack_into(header, OFF_VERSION_MAJOR, 2)
    _U64.pack_into(header, OFF_VERSION_MINOR, 0)
    header[OFF_BUILD_VERSION : OFF_BUILD_VERSION + BUILD_BYTES] = _padded(build_version, BUILD_BYTES)
    _U32.pack_into(header, OFF_NUM_TPB, int(info.get("num_tpb", 1)))
    digest = hashlib.sha256(data).digest()
    header[OFF_HASH : OFF_HASH + HASH_BYTES] = digest.ljust(HASH_BYTES, b"\0")
    header[OFF_UUID : OFF_UUID + UUID_BYTES] = hashlib.sha256(digest + name.encode()).digest()[:UUID_BYTES]
    header[OFF_NAME : OFF_NAME + NAME_BYTES] = _padded(name, NAME_BYTES)
    _U32.pack_into(header, OFF_REQUESTED_TPB, int(info.get("num_tpb", 1)))
    path.write_bytes(bytes(header) + data)


def read_neff(path: Path) -> NeffInfo:
    raw = Path(path).read_bytes()
    if len(raw) < HEADER_SIZE:
        raise NeffFormatError(f"{path}: {len(raw)} bytes is shorter than the NEFF header")
    header_size = _U64.unpack_from(raw, OFF_HEADER_SIZE)[0]
    if header_size != HEADER_SIZE:
        raise NeffFormatError(f"{path}: header size {header_size}, expected {HEADER_SIZE}")
    try:  # mode "r" reads a gzipped tar (the real packaging) and a plain one alike
        with tarfile.open(fileobj=io.BytesIO(raw[HEADER_SIZE:]), mode="r") as tar:
            docs = {m.name: json.load(_member(tar, m)) for m in tar.getmembers() if m.name.endswith(".json")}
    except (tarfile.TarError, json.JSONDecodeError, EOFError, OSError) as exc:
        raise NeffFormatError(f"{path}: unreadable NEFF payload ({exc})") from None
    variables = _variables(docs.get("sg00/def.json", {}))
    return NeffInfo(
        packaging_version=_U64.unpack_from(raw, OFF_PKG_VERSION)[0],
        version=(_U64.unpack_from(raw, OFF_VERSION_MAJOR)[0], _U64.unpack_from(raw, OFF_VERSION_MINOR)[0]),
        build_version=_cstr(raw[OFF_BUILD_VERSION : OFF_BUILD_VERSION + BUILD_BYTES]),
        name=_cstr(raw[OFF_NAME : OFF_NAME + NAME_BYTES]),
        num_tpb=_U32.unpack_from(raw, OFF_NUM_TPB)[0],
        requested_tpb_count=_U32.unpack_from(raw, OFF_REQUESTED_TPB)[0],
        info=docs.get("info.json", {}),
        neff=docs.get("neff.json", {}),
        inputs=[n for n, kind in variables if kind == "input"],
        outputs=[n for n, kind in variables if kind == "output"],
    )


def _variables(definition: Any) -> list[tuple[str, str]]:
    """(name, type) in file order from def.json's variables, read as a {name: {...}} map or a list of
    records: the reference documents only that def.json lists variables with a type, not its schema."""
    found = definition.get("var", definition.get("vars", {})) if isinstance(definition, dict) else {}
    if isinstance(found, dict):
        return [(str(n), str(v.get("type", ""))) for n, v in found.items() if isinstance(v, dict)]
    if isinstance(found, list):
        return [(str(v.get("name", "")), str(v.get("type", ""))) for v in found if isinstance(v, dict)]
    return []


def _padded(text: str, size: int) -> bytes:
    return text.encode()[:size].ljust(size, b"\0")


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    handle = tar.extractfile(member)
    if handle is None:
        raise tarfile.TarError(f"{member.name} is not a regular file")
    return handle
