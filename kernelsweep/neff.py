"""The NEFF container: a 1024-byte header followed by a tarball (reference section 6).

The same reader serves real and simulated NEFFs, which is why the simulator writes this exact
shape: versions and input/output names are pulled out of any NEFF by one code path.
"""

from __future__ import annotations

import io
import json
import struct
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

HEADER_SIZE = 1024
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
OFF_PKG_VERSION, OFF_HEADER_SIZE, OFF_DATA_SIZE = 0, 8, 16
OFF_VERSION_MAJOR, OFF_VERSION_MINOR, OFF_BUILD_VERSION = 24, 32, 40
OFF_NUM_TPB, OFF_HASH, OFF_NAME, OFF_LNC_SIZE = 168, 172, 220, 552


class NeffFormatError(ValueError):
    pass


@dataclass(frozen=True)
class NeffInfo:
    version: tuple[int, int]
    build_version: str
    name: str
    num_tpb: int
    lnc_size: int
    info: dict
    neff: dict
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def write_neff(
    path: Path,
    *,
    name: str,
    info: dict,
    neff: dict,
    variables: dict[str, dict],
    lnc_size: int,
    build_version: str,
) -> None:
    """Write header + tar(info.json, neff.json, sg00/def.json)."""
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as tar:
        for member, doc in (("info.json", info), ("neff.json", neff), ("sg00/def.json", {"var": variables})):
            data = json.dumps(doc, sort_keys=True).encode()
            entry = tarfile.TarInfo(member)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    data = payload.getvalue()
    header = bytearray(HEADER_SIZE)
    _U64.pack_into(header, OFF_PKG_VERSION, 1)
    _U64.pack_into(header, OFF_HEADER_SIZE, HEADER_SIZE)
    _U64.pack_into(header, OFF_DATA_SIZE, len(data))
    _U64.pack_into(header, OFF_VERSION_MAJOR, 2)
    _U64.pack_into(header, OFF_VERSION_MINOR, 0)
    header[OFF_BUILD_VERSION : OFF_BUILD_VERSION + 128] = build_version.encode()[:128].ljust(128, b"\0")
    _U32.pack_into(header, OFF_NUM_TPB, int(info.get("num_tpb", 1)))
    header[OFF_NAME : OFF_NAME + 256] = name.encode()[:256].ljust(256, b"\0")
    _U32.pack_into(header, OFF_LNC_SIZE, lnc_size)
    path.write_bytes(bytes(header) + data)


def read_neff(path: Path) -> NeffInfo:
    raw = Path(path).read_bytes()
    if len(raw) < HEADER_SIZE:
        raise NeffFormatError(f"{path}: {len(raw)} bytes is shorter than the NEFF header")
    header_size = _U64.unpack_from(raw, OFF_HEADER_SIZE)[0]
    if header_size != HEADER_SIZE:
        raise NeffFormatError(f"{path}: header size {header_size}, expected {HEADER_SIZE}")
    try:
        with tarfile.open(fileobj=io.BytesIO(raw[HEADER_SIZE:]), mode="r") as tar:
            docs = {m.name: json.load(_member(tar, m)) for m in tar.getmembers() if m.name.endswith(".json")}
    except (tarfile.TarError, json.JSONDecodeError) as exc:
        raise NeffFormatError(f"{path}: unreadable NEFF payload ({exc})") from None
    variables = docs.get("sg00/def.json", {}).get("var", {})
    return NeffInfo(
        version=(_U64.unpack_from(raw, OFF_VERSION_MAJOR)[0], _U64.unpack_from(raw, OFF_VERSION_MINOR)[0]),
        build_version=_cstr(raw[OFF_BUILD_VERSION : OFF_BUILD_VERSION + 128]),
        name=_cstr(raw[OFF_NAME : OFF_NAME + 256]),
        num_tpb=_U32.unpack_from(raw, OFF_NUM_TPB)[0],
        lnc_size=_U32.unpack_from(raw, OFF_LNC_SIZE)[0],
        info=docs.get("info.json", {}),
        neff=docs.get("neff.json", {}),
        inputs=[n for n, v in variables.items() if v.get("type") == "input"],
        outputs=[n for n, v in variables.items() if v.get("type") == "output"],
    )


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    handle = tar.extractfile(member)
    if handle is None:
        raise tarfile.TarError(f"{member.name} is not a regular file")
    return handle
