"""Where in the kernel's source its time goes: instruction time by (source file, line, engine).

A NEFF compiled with the SDK's debug-info setting (NKI_DEBUG_INFO=True, kernelsweep.toolchain.tracing)
carries `kernel_debug_info.json`, which maps each instruction to its NKI source location; Explorer's
Parquet view then fills the Instruction table's `nki_source_location` ("file.py:42", or a list of
them where the compiler fused instructions from several lines) next to each instruction's
`engine` and `duration_ns` (profile schema 7.4.0). This module sums the durations by location and
engine (an instruction of several locations is shared equally between them) and keeps the top
TOP_LINES with their time and share of all instruction time in the table, instructions without a
location included. It reads only the three columns it needs, in batches, grouped by pyarrow.

No debug info is not an error: the row gets no hotspots and a note saying why (`Hotspots.note`).
"""

from __future__ import annotations

import json
import tarfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelsweep.toolchain.neff import HEADER_SIZE
from kernelsweep.toolchain.resolve import Toolchain

TOP_LINES = 10
DEBUG_INFO_FILE = "kernel_debug_info.json"
INSTRUCTION_TABLE = "Instruction"
COLUMNS = ("engine", "duration_ns", "nki_source_location")
NO_DEBUG_INFO = (
    "no hotspots: the NEFF has no kernel_debug_info.json (compiled without NKI_DEBUG_INFO=True); "
    "set capture.hotspots = true and compile again"
)


@dataclass(frozen=True)
class Hotspot:
    file: str
    line: int
    engine: str
    instructions: int  # instructions (shares of fused ones count whole) at this line on this engine
    time_us: float
    share_percent: float  # of all instruction time in the profile


@dataclass(frozen=True)
class Hotspots:
    """The top lines, or None with the reason there are none."""

    lines: tuple[Hotspot, ...] | None
    note: str | None = None

    def as_records(self) -> list[dict[str, Any]] | None:
        return None if self.lines is None else [h.__dict__ for h in self.lines]


def locations(text: str | None) -> list[tuple[str, int]]:
    """("file.py", 42) pairs from one `nki_source_location` value: "file.py:42", a JSON list of
    them, or a comma-separated list; unparsable entries are left out."""
    if not text:
        return []
    entries: Iterable[object]
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            entries = json.loads(stripped)
        except ValueError:
            entries = stripped.strip("[]").split(",")
    else:
        entries = stripped.split(",")
    found = []
    for entry in entries:
        file, _, line = str(entry).strip().strip("'\"").rpartition(":")
        if file and line.isdigit():
            found.append((file, int(line)))
    return found


def attribute(groups: Iterable[tuple[str | None, str | None, float, int]], top: int = TOP_LINES) -> tuple[Hotspot, ...]:
    """The top lines from (location text, engine, summed duration ns, instruction count) groups; the
    share is of the duration of every group, located or not. Ties keep file and line order."""
    total = 0.0
    by_line: dict[tuple[str, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for location, engine, duration_ns, count in groups:
        total += duration_ns
        places = locations(location)
        for file, line in places:
            entry = by_line[(file, line, engine or "unknown")]
            entry[0] += duration_ns / len(places)
            entry[1] += count
    if total <= 0:
        return ()
    ranked = sorted(by_line.items(), key=lambda item: (-item[1][0], item[0]))[:top]
    return tuple(
        Hotspot(file, line, engine, int(count), round(ns / 1e3, 6), round(100 * ns / total, 4))
        for (file, line, engine), (ns, count) in ranked
    )


def instruction_files(folder: Path) -> list[Path]:
    """Instruction.parquet, or the parts Explorer split a big table into (Instruction_0.parquet, ...)."""
    whole = folder / f"{INSTRUCTION_TABLE}.parquet"
    if whole.is_file():
        return [whole]
    return sorted(folder.glob(f"{INSTRUCTION_TABLE}_*.parquet"), key=lambda p: _part_number(p.stem))


def _part_number(stem: str) -> int:
    suffix = stem.rpartition("_")[2]
    return int(suffix) if suffix.isdigit() else 1 << 30


def grouped(files: Sequence[Path]) -> list[tuple[str | None, str | None, float, int]]:
    """(location, engine, summed duration ns, count) per distinct location and engine, computed by
    pyarrow over the three columns only; a table without locations has one group per engine."""
    import pyarrow as pa  # deferred: only extraction with hotspots reads Parquet here
    import pyarrow.dataset as ds

    dataset = ds.dataset([str(f) for f in files], format="parquet")
    names = [c for c in COLUMNS if c in dataset.schema.names]
    if "duration_ns" not in names:
        return []
    table = dataset.to_table(columns=names)
    if "nki_source_location" not in names:
        table = table.append_column("nki_source_location", pa.nulls(len(table), pa.string()))
    if "engine" not in names:
        table = table.append_column("engine", pa.nulls(len(table), pa.string()))
    table = table.cast(
        pa.schema([(n, pa.string() if n != "duration_ns" else pa.float64()) for n in table.schema.names])
    )
    summed = table.group_by(["nki_source_location", "engine"], use_threads=False).aggregate(
        [("duration_ns", "sum"), ("duration_ns", "count")]
    )
    return [
        (r["nki_source_location"], r["engine"], float(r["duration_ns_sum"] or 0.0), int(r["duration_ns_count"]))
        for r in summed.to_pylist()
    ]


def has_debug_info(neff: Path) -> bool:
    """Whether the NEFF's payload holds kernel_debug_info.json (at any folder depth)."""
    import io

    raw = Path(neff).read_bytes()[HEADER_SIZE:]
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r") as tar:
            return any(Path(name).name == DEBUG_INFO_FILE for name in tar.getnames())
    except (tarfile.TarError, EOFError, OSError):
        return False


def from_profile(neff: Path, folder: Path | None, no_table: str | None = None) -> Hotspots:
    """The hotspots of one viewed profile: `folder` is Explorer's Parquet output (None: there is no
    instruction table to read, `no_table` says why)."""
    if not has_debug_info(neff):
        return Hotspots(None, NO_DEBUG_INFO)
    if folder is None:
        return Hotspots(None, no_table or "no hotspots: the profile has no instruction table")
    files = instruction_files(folder)
    if not files:
        return Hotspots(None, f"no hotspots: the view wrote no {INSTRUCTION_TABLE}.parquet")
    lines = attribute(grouped(files))
    if not lines:
        return Hotspots(None, "no hotspots: no instruction in the profile names a source location")
    return Hotspots(lines)


def wanted(capture: Any) -> bool:
    """`capture.hotspots` (a CaptureSettings): on, off, or auto: on when the view is Parquet anyway."""
    return capture.hotspots == "on" or (capture.hotspots == "auto" and capture.profile_format == "parquet")


def of_view(
    toolchain: Toolchain, neff: Path, ntff: Path, parquet: Path | None, workdir: Path, timeout_seconds: float
) -> Hotspots:
    """The hotspots of one captured repeat: from its Parquet view when the point was viewed as
    Parquet, else from one more view of it as Parquet (neuron-explorer only), never when the NEFF
    has no debug info to attribute with."""
    if not has_debug_info(neff):
        return Hotspots(None, NO_DEBUG_INFO)
    if parquet is None:
        if toolchain.profiler != "neuron-explorer":
            return Hotspots(None, f"no hotspots: {toolchain.profiler} has no Parquet view (its Instruction table)")
        from kernelsweep.toolchain import profiler  # deferred: the trace worker imports nothing of this

        workdir.mkdir(parents=True, exist_ok=True)
        parquet = profiler.view(toolchain, neff, ntff, workdir, timeout_seconds, "parquet").path
    return from_profile(neff, parquet)


def heat(source: str, hotspots: Sequence[dict[str, Any]], file_name: str) -> list[tuple[int, str, float]]:
    """(line number, text, share percent of that line over every engine) for each line of `source`,
    the shares of the hotspots whose file is `file_name` (compared by base name, as profiles print it)."""
    shares: dict[int, float] = defaultdict(float)
    for spot in hotspots:
        if Path(str(spot["file"])).name == Path(file_name).name:
            shares[int(spot["line"])] += float(spot["share_percent"])
    return [(number, text, shares.get(number, 0.0)) for number, text in enumerate(source.splitlines(), start=1)]


def render_text(source: str, hotspots: Sequence[dict[str, Any]], file_name: str) -> str:
    """The source with a share column and a bar per hot line, for a terminal (`kernelsweep lineage`)."""
    rows = heat(source, hotspots, file_name)
    top = max((share for _, _, share in rows), default=0.0) or 1.0
    lines = [f"hotspots in {Path(file_name).name} (share of instruction time by line):"]
    for number, text, share in rows:
        bar = "#" * max(1, round(10 * share / top)) if share else ""
        shown = f"{share:5.1f}%" if share else "      "
        lines.append(f"{shown} {bar:<10} {number:4d}  {text}")
    return "\n".join(lines)
