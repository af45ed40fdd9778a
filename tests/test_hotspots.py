"""Source-line hotspots (kernelsweep.hotspots): instruction time by (file, line, engine) from an
Explorer Instruction table, against answers computed by hand; no debug info is a note, not an error;
and the whole path on the simulator, whose instruction table comes from the kernel's real lines."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from stage_context import point, sim_context

from kernelsweep.hotspots import (
    NO_DEBUG_INFO,
    TOP_LINES,
    Hotspot,
    from_profile,
    heat,
    locations,
    render_text,
)
from kernelsweep.stages import capture_stage, compile_stage, extract_stage, inputs_stage, trace_stage
from kernelsweep.toolchain.neff import write_neff

# (engine, duration ns, nki_source_location, instructions): 815 ns in all, 50 of them with no location
TABLE = [
    ("tensor", 100, "k.py:10", 3),
    ("vector", 50, "k.py:12", 2),
    ("vector", 25, "k.py:10", 1),
    ("dma", 75, "k.py:14", 4),
    ("scalar", 40, '["k.py:20", "k.py:21"]', 1),  # fused from two lines: 20 ns each
    ("gpsimd", 50, None, 1),
]
# By hand: time / 815 ns; ties (300 ns each) in file, line, engine order.
EXPECTED = (
    Hotspot("k.py", 10, "tensor", 3, 0.3, 36.8098),
    Hotspot("k.py", 14, "dma", 4, 0.3, 36.8098),
    Hotspot("k.py", 12, "vector", 2, 0.1, 12.2699),
    Hotspot("k.py", 10, "vector", 1, 0.025, 3.0675),
    Hotspot("k.py", 20, "scalar", 1, 0.02, 2.454),
    Hotspot("k.py", 21, "scalar", 1, 0.02, 2.454),
)


def _neff(path: Path, debug_info: bool) -> Path:
    extra = {"kernel_debug_info.json": {"file": "k.py"}} if debug_info else None
    write_neff(path, name="k", info={"num_tpb": 1}, neff={}, variables={}, build_version="0", extra=extra)
    return path


def _table(folder: Path, rows: list[tuple[str, int, str | None, int]], parts: int = 1) -> Path:
    """Explorer's Instruction table (the columns hotspots read, and two it does not), split like a big one."""
    flat = [
        {"engine": e, "duration_ns": ns, "nki_source_location": where, "opcode": "X", "id": i}
        for i, (e, ns, where, count) in enumerate(r for r in rows for _ in range(r[3]))
    ]
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(flat) // parts)
    for part in range(parts):
        name = "Instruction.parquet" if parts == 1 else f"Instruction_{part}.parquet"
        pq.write_table(pa.Table.from_pylist(flat[part * size : (part + 1) * size]), folder / name)
    return folder


@pytest.mark.parametrize("parts", [1, 3])
def test_top_lines_and_shares_equal_the_hand_computed_answer(tmp_path, parts):
    found = from_profile(_neff(tmp_path / "file.neff", True), _table(tmp_path / "profile", TABLE, parts))
    assert found.note is None and found.lines == EXPECTED


def test_only_the_top_lines_are_kept(tmp_path):
    rows = [("vector", 10 + line, f"k.py:{line}", 1) for line in range(TOP_LINES + 5)]
    found = from_profile(_neff(tmp_path / "file.neff", True), _table(tmp_path / "profile", rows))
    assert found.lines is not None and len(found.lines) == TOP_LINES
    assert [h.line for h in found.lines] == list(range(TOP_LINES + 4, 4, -1))  # the longest first


def test_a_neff_without_debug_info_gives_no_hotspots_and_says_why(tmp_path):
    found = from_profile(_neff(tmp_path / "file.neff", False), _table(tmp_path / "profile", TABLE))
    assert found.lines is None and found.note == NO_DEBUG_INFO and "NKI_DEBUG_INFO=True" in NO_DEBUG_INFO


def test_a_table_without_locations_gives_a_note(tmp_path):
    unlocated = [("tensor", 100, None, 2)]
    found = from_profile(_neff(tmp_path / "file.neff", True), _table(tmp_path / "profile", unlocated))
    assert found.lines is None and "names a source location" in (found.note or "")


def test_locations_read_every_form_explorer_writes():
    assert locations("k.py:42") == [("k.py", 42)]
    assert locations('["a.py:1", "b/c.py:2"]') == [("a.py", 1), ("b/c.py", 2)]
    assert locations("a.py:1, b.py:2") == [("a.py", 1), ("b.py", 2)]
    assert locations("") == [] and locations(None) == [] and locations("no line") == []


def test_heat_puts_each_share_on_its_line_of_the_source():
    source = "line one\nline two\nline three\n"
    spots = [h.__dict__ for h in EXPECTED] + [{"file": "other.py", "line": 1, "engine": "x", "share_percent": 50.0}]
    shares = {number: share for number, _, share in heat(source, [{**s, "line": s["line"] - 9} for s in spots], "k.py")}
    assert shares == {1: pytest.approx(36.8098 + 3.0675), 2: 0.0, 3: pytest.approx(12.2699)}
    text = render_text(source, [{**s, "line": s["line"] - 9} for s in spots], "/x/k.py")
    assert "39.9% ##########    1  line one" in text and "      " + " " * 11 + "2  line two" in text


@pytest.mark.slow
def test_the_simulated_profile_attributes_the_kernels_own_lines(tmp_path):
    """vector_add on the simulator, compiled with debug info and viewed as Parquet: its lines are the
    kernel's nisa calls, and their shares follow from the profile's own engine times by hand: the add
    line holds all Vector Engine time, the three DMA lines (equal bytes each) a third of the DMA time."""
    ctx, p = sim_context(tmp_path, profile_format="parquet"), point("vector_add", n=8192)
    compiled = compile_stage(ctx, p, trace_stage(ctx, p))
    inputs = inputs_stage(ctx, p)
    extracted = extract_stage(ctx, p, compiled, inputs, capture_stage(ctx, p, compiled, inputs))
    source = Path("kernelsweep/kernels/nki/vector_add.py").read_text().splitlines()
    line_of = {
        call: next(i for i, text in enumerate(source, 1) if call in text)
        for call in ("src=a[t]", "src=b[t]", "tensor_tensor", "dst=out[t]")
    }
    values = extracted.metrics.values
    vector, dma = values["vector_engine_active_time_us"], values["dma_active_time_us"]
    assert extracted.hotspots is not None and extracted.hotspots.lines is not None
    found = {(h.file, h.line, h.engine): h.share_percent for h in extracted.hotspots.lines}
    total = vector + dma
    expected = {("vector_add.py", line_of["tensor_tensor"], "vector"): 100 * vector / total}
    expected |= {
        ("vector_add.py", line_of[k], "dma"): 100 * dma / 3 / total for k in ("src=a[t]", "src=b[t]", "dst=out[t]")
    }
    assert found.keys() == expected.keys()
    for key, share in expected.items():
        assert found[key] == pytest.approx(share, abs=0.05), key

    plain = sim_context(tmp_path / "plain", hotspots="off")  # the same point compiled without debug info
    neff = compile_stage(plain, p, trace_stage(plain, p))
    viewed = sim_context(tmp_path / "plain", hotspots="on")
    again = extract_stage(
        viewed, p, neff, inputs_stage(viewed, p), capture_stage(viewed, p, neff, inputs_stage(viewed, p))
    )
    assert again.hotspots is not None and again.hotspots.lines is None and again.hotspots.note == NO_DEBUG_INFO
