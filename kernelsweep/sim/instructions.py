"""The simulated profile's instruction table: the compiled program, instruction by instruction.

The simulated tracer records the program by kernel source line and engine (how many instructions,
how much work: MACs, elements, bytes); here each engine's modelled active time is shared among its
lines by their work, and each line's among its instructions. Rows carry the Instruction table's
fields (profile schema 7.4.0): `start_ts`, `end_ts`, `duration_ns`, `engine`, `opcode`, `operands`,
`id`, `pc`, `bir_id`, `pcore_idx` and `nki_source_location`, which is "file.py:line" only when the
NEFF holds kernel_debug_info.json (compiled with NKI_DEBUG_INFO=True), null otherwise, as on a
device. DMA-issuing instructions are on engine `dma` and carry the DMA's modelled time (a choice of
the simulator: a device's DMA time is in the DmaPacket table, the trigger's in Instruction).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from kernelsweep.toolchain.neff import HEADER_SIZE

DEBUG_INFO_FILE = "kernel_debug_info.json"
_ENGINE_TIME = {
    "tensor": "tensor_engine_active_time",
    "vector": "vector_engine_active_time",
    "scalar": "scalar_engine_active_time",
    "gpsimd": "gpsimd_engine_active_time",
    "dma": "dma_active_time",
}
_OPCODES = {
    "tensor": "MATMUL",
    "vector": "TENSOR_TENSOR",
    "scalar": "ACTIVATE",
    "gpsimd": "MEMSET",
    "dma": "DMA_TRIGGER",
}
_FIELDS = (
    ("start_ts", "int64"),
    ("end_ts", "int64"),
    ("duration_ns", "int64"),
    ("engine", "string"),
    ("opcode", "string"),
    ("operands", "string"),
    ("id", "int64"),
    ("pc", "int64"),
    ("bir_id", "string"),
    ("pcore_idx", "int64"),
    ("nki_source_location", "string"),
)


def instruction_schema() -> Any:
    import pyarrow as pa  # deferred: only the Parquet view writes the table

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in _FIELDS])


def neff_debug_info(neff: Path | None) -> dict | None:
    """The NEFF's kernel_debug_info.json, or None (no file, or no NEFF given)."""
    if neff is None or not Path(neff).is_file():
        return None
    try:
        with tarfile.open(fileobj=io.BytesIO(Path(neff).read_bytes()[HEADER_SIZE:]), mode="r") as tar:
            member = next((m for m in tar.getmembers() if Path(m.name).name == DEBUG_INFO_FILE), None)
            handle = tar.extractfile(member) if member else None
            return json.load(handle) if handle else None
    except (tarfile.TarError, EOFError, OSError, ValueError):
        return None


def instruction_rows(ir: dict, whole: dict[str, Any], debug: dict | None) -> list[dict[str, Any]]:
    """One row per instruction of the program; `whole` is the logical core's summary in seconds."""
    lines = [tuple(entry) for entry in ir.get("lines", ())]
    work: dict[str, int] = {}
    for _, engine, _, units in lines:
        work[engine] = work.get(engine, 0) + units
    rows: list[dict[str, Any]] = []
    clock = {engine: 0 for engine in work}
    for line, engine, count, units in lines:
        engine_ns = round(float(whole.get(_ENGINE_TIME.get(engine, ""), 0.0) or 0.0) * 1e9)
        line_ns = round(engine_ns * units / work[engine]) if work[engine] else 0
        location = f"{debug['file']}:{line}" if debug and line else None
        for index in range(count):
            duration = line_ns // count + (1 if index < line_ns % count else 0)
            start = clock[engine]
            clock[engine] = start + duration
            pc = len(rows)
            rows.append(
                {
                    "start_ts": start,
                    "end_ts": start + duration,
                    "duration_ns": duration,
                    "engine": engine,
                    "opcode": _OPCODES.get(engine, "UNKNOWN"),
                    "operands": "",
                    "id": pc,
                    "pc": pc,
                    "bir_id": f"sg0000:{pc}",
                    "pcore_idx": 0,
                    "nki_source_location": location,
                }
            )
    return rows
