"""What the simulated `view` writes, in each of the profiler's output formats.

One modelled summary, four containers, each in the units the real tool uses there:
  json          `{"summary": [{...}], "instruction": [...]}`, percents 0-100 (seed 000's tables)
  summary-json  `{"n_<id>": {...}}`, `*_percent` as fractions in [0, 1] (seed 002's raw record)
  summary-text  one `name value` line per field
  parquet       an Explorer output folder: Summary.parquet (one row, the same field names) and
                Metadata.parquet (one row of clocks, bandwidths and versions), neuron-explorer only
so metrics extraction is exercised on every format from one NTFF.
"""

from __future__ import annotations

import json
from pathlib import Path

from kernelsweep.platforms import PLATFORMS
from kernelsweep.sim import COMPILER_VERSION, PROFILER_VERSION, RUNTIME_VERSION
from kernelsweep.sim.model import Workload, predict, summary

EXPLORER_SCHEMA_VERSION = "7.4.0"  # Explorer's profile schema at SDK 2.31 (reference section 5)
TENSOR_ENGINE_SIZE = 128


def workload(ir: dict) -> Workload:
    return Workload(
        platform=PLATFORMS[ir["platform"]],
        lnc=ir["lnc"],
        dtype=ir["dtype"],
        flops=ir["flops"],
        hbm_bytes=ir["hbm_bytes"],
        input_bytes=sum(t["bytes"] for t in ir["inputs"]),
        output_bytes=sum(t["bytes"] for t in ir["outputs"]),
        dma_transfers=ir["dma_transfers"],
        engine=ir["engine"],
        parallelism=ir.get("parallelism"),
        code_factor=ir.get("code_factor", 1.0),
    )


def modelled(record: dict) -> tuple[dict[str, float | int], dict[str, object], float]:
    """(summary fields in the profiler's names and units, version facts, seconds) for one NTFF."""
    w = workload(record["ir"])
    timing = predict(
        w, jitter_key=f"{record['run_key']}:{record['exec_index']}", run_factor=record.get("run_factor", 1.0)
    )
    info = {
        "instance_type": f"{w.platform.name}.sim",
        "compiler_version": record["ir"].get("compiler_version", COMPILER_VERSION),
        "runtime_version": RUNTIME_VERSION,
        "profiler_version": PROFILER_VERSION,
        "is_simulation": True,
    }
    return summary(w, timing), info, timing.total


def full_json(record: dict) -> str:
    fields, info, total = modelled(record)
    return json.dumps({"summary": [{**fields, **info}], "instruction": _instructions(record, total)})


def summary_json(record: dict) -> str:
    fields, info, _ = modelled(record)
    fractions = {k: (v / 100 if k.endswith("_percent") else v) for k, v in fields.items()}
    return json.dumps({f"n_{record['run_key'][:16]}": {**fractions, **info}}, indent=1)


def summary_text(record: dict) -> str:
    fields, info, _ = modelled(record)
    return "\n".join(f"{k:<45} {v}" for k, v in {**fields, **info}.items())


def write_parquet(record: dict, folder: Path) -> None:
    # Deferred: pyarrow is heavy and only this format needs it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields, info, _ = modelled(record)
    w = workload(record["ir"])
    metadata = {
        "tensor_engine_num_rows": TENSOR_ENGINE_SIZE,
        "tensor_engine_num_cols": TENSOR_ENGINE_SIZE,
        "tensor_engine_clock_freq": w.platform.tensor_engine_clock_hz,
        "hbm_ddr_bandwidth": w.platform.hbm_bandwidth(w.lnc),
        **info,
        "profile_schema_version": EXPLORER_SCHEMA_VERSION,
        "ntff_version": record["ntff_version"],
    }
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([fields]), folder / "Summary.parquet")
    pq.write_table(pa.Table.from_pylist([metadata]), folder / "Metadata.parquet")


def _instructions(record: dict, total_seconds: float) -> list[dict]:
    count = record["ir"]["dma_transfers"]
    step = int(total_seconds * 1e9 / max(count, 1))
    return [
        {
            "timestamp": i * step,
            "duration": step // 2,
            "label": "qSyncIO",
            "opcode": "DMA",
            "hlo_name": record["ir"]["kernel"],
            "nki_source_location": f"{record['ir']['kernel']}.py:{i + 1}",
        }
        for i in range(count)
    ]
