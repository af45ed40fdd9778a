"""The IR folder's round trip through its tar (`pack` after tracing, `unpack` before compiling), on
Pythons with tarfile's extraction filters (3.11.4+) and without them (3.11.0-3.11.3: Debian 12's
python3.11 is 3.11.2). Without filters, an archive member that is not a file or folder inside the IR
folder is refused before anything is written, and the mode bits the "data" filter drops are dropped;
with them, the filter does the same, except that it puts an absolute name inside the folder."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from kernelsweep.toolchain.tracing.job import unpack
from kernelsweep.toolchain.tracing.request import pack


@pytest.fixture(params=["filters", "no filters"])
def python(request, monkeypatch):
    if request.param == "filters" and not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no extraction filters (3.11.4 and later have)")
    if request.param == "no filters":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_ir_folder_comes_back_as_it_was_packed(python, tmp_path):
    ir = tmp_path / "ir"
    (ir / "weights").mkdir(parents=True)
    (ir / "kernel.py").write_text("def kernel(a): return a\n")
    (ir / "weights" / "w0.bin").write_bytes(bytes(range(256)))
    (ir / "kernel.py").chmod(0o6777)  # setuid, setgid, writable by all: the "data" filter drops those bits
    back = unpack(pack(ir, tmp_path / "ir.tar"), tmp_path / "back")
    assert _files(back) == _files(ir) and len(_files(back)) == 2
    assert (back / "kernel.py").stat().st_mode & 0o7777 == 0o755


@pytest.mark.parametrize("kind", ["parent", "absolute", "link"])
def test_a_member_outside_the_folder_or_not_a_file_is_refused_and_nothing_lands_outside(python, kind, tmp_path):
    outside = tmp_path / "back" / "escaped.txt"
    member = {"parent": "../escaped.txt", "absolute": str(outside), "link": "link"}[kind]
    archive = tmp_path / "bad.tar"
    with tarfile.open(archive, "w") as tar:
        ok = tarfile.TarInfo("kernel.py")
        ok.size = 3
        tar.addfile(ok, io.BytesIO(b"abc"))
        bad = tarfile.TarInfo(member)
        if kind == "link":
            bad.type, bad.linkname = tarfile.SYMTYPE, "/etc/passwd"
        else:
            bad.size = 3
        tar.addfile(bad, io.BytesIO(b"abc"))
    try:
        unpack(archive, tmp_path / "back" / "ir")
    except tarfile.TarError:
        refused = True
    else:
        refused = False
    absolute_kept_inside = python == "filters" and kind == "absolute"  # the "data" filter strips its "/"
    assert refused != absolute_kept_inside
    assert not outside.exists()
    if python == "no filters":  # refused before extracting anything
        assert not (tmp_path / "back" / "ir" / "kernel.py").exists()
