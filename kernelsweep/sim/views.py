"""What the simulated `view` writes, in each of the profiler's output formats.

One modelled summary, four containers, each in the units the real tool uses there:
  json          `{"summary": [{...}], "instruction": [...]}`, percents 0-100 (seed 000's tables)
  summary-json  `{"n_<id>": {...}}`, `*_percent` as fractions in [0, 1] (seed 002's raw record)
  summary-text  one `name value` line per field
  parquet       an Explorer output folder: Summary.parquet (the same field names), Metadata.parquet
                (clocks, bandwidths and versions), SchemaFields.parquet (each Summary field's unit)
                and, when there is one, Warning.parquet; neuron-explorer only
so metrics extraction is exercised on every format from one NTFF.

Harsher than a kind profiler, where the evidence allows:
  * at LNC>1 every container holds one summary entry per physical core (nki-library's harness reads
    show-session cycle counts per physical core; whether summary-json does is open, see
    `doctor --smoke`), each with its own share of the work, so rows must combine them;
  * a trn2 NTFF captured without --enable-dge-notifs under-reports its DMA figures (the share of
    UNSEEN_DYNAMIC_DMA of them, a modelling choice) and the view warns "DMA results may not be
    accurate", as Explorer does (troubleshooting.rst:229-233);
  * the Summary's field shapes follow the configured tools release (sim.tools).
"""

from __future__ import annotations

import json
from pathlib import Path

from kernelsweep.platforms import PLATFORMS
from kernelsweep.profiles.schema import SUMMARY_FIELDS
from kernelsweep.sim import COMPILER_VERSION, RUNTIME_VERSION
from kernelsweep.sim.instructions import instruction_rows, instruction_schema
from kernelsweep.sim.model import Workload, predict, summary
from kernelsweep.sim.tools import ToolsRelease

TENSOR_ENGINE_SIZE = 128
UNSEEN_DYNAMIC_DMA = 0.5  # of the DMA figures a capture without DGE notifications misses (simulated)
DMA_WARNING = (
    "DMA results may not be accurate: DGE notifications were not collected; recapture with --enable-dge-notifs"
)
_DMA_FIELDS = ("dma_active_time", "dma_transfer_count", "dma_transfer_total_bytes", "mbu_estimated_percent")
_SHARED = ("inputs_outputs_weights_size_bytes", "weight_size_bytes", "mm_arithmetic_intensity",
           "peak_flops_bandwidth_ratio")  # fmt: skip
_PER_CORE_UTILISATION = ("mfu_estimated_percent", "mfu_max_achievable_estimated_percent", "hfu_estimated_percent")


def workload(ir: dict) -> Workload:
    """The model's view of a traced kernel; one `timed_from_trace` is timed from what its trace did."""
    traced = ir.get("timed_from_trace", False)
    return Workload(
        platform=PLATFORMS[ir["platform"]],
        lnc=ir["lnc"],
        dtype=ir["dtype"],
        flops=ir["flops"],
        hbm_bytes=ir["hbm_bytes"],
        input_bytes=sum(t["bytes"] for t in ir["inputs"]),
        output_bytes=sum(t["bytes"] for t in ir["outputs"]),
        dma_transfers=ir["traced_dma_count"] if traced else ir["dma_transfers"],
        engine=ir["engine"],
        parallelism=ir.get("parallelism"),
        code_factor=ir.get("code_factor", 1.0),
        traced_hbm_bytes=ir["traced_hbm_bytes"] if traced else None,
        traced_macs=ir.get("traced_macs", 0),
        traced_pe_cycles=ir.get("traced_pe_cycles", 0),
    )


def dma_warning(record: dict) -> str | None:
    """Explorer's warning for an NTFF whose DMAs it could not fully account for."""
    dge_platform = PLATFORMS[record["ir"]["platform"]].dge_notifs_default
    return DMA_WARNING if dge_platform and not record.get("dge_notifs", False) else None


def whole_core(record: dict) -> tuple[dict[str, float | int], Workload, float]:
    """(the logical core's summary in seconds and percents 0-100, its workload, seconds) for one NTFF."""
    w = workload(record["ir"])
    timing = predict(
        w, jitter_key=f"{record['run_key']}:{record['exec_index']}", run_factor=record.get("run_factor", 1.0)
    )
    whole = summary(w, timing)
    for name in [k for k in whole if k.endswith("_time")]:  # whole nanoseconds, as the hardware counts
        whole[name] = round(whole[name] * 1e9) * 1e-9
    if dma_warning(record):
        whole = _without_dynamic_dma(whole)
    return whole, w, timing.total


def modelled(record: dict, tools: ToolsRelease) -> tuple[list[dict[str, float | int]], dict[str, object], float]:
    """(one summary per physical core in the release's names and units, percents 0-100; version
    facts; seconds) for one NTFF."""
    whole, w, total = whole_core(record)
    info = {
        "instance_type": f"{w.platform.name}.sim",
        "compiler_version": record["ir"].get("compiler_version", COMPILER_VERSION),
        "runtime_version": RUNTIME_VERSION,
        "profiler_version": tools.profiler_version,
        "is_simulation": True,
    }
    return [_in_release_units(e, tools) for e in per_core(whole, w)], info, total


def _without_dynamic_dma(whole: dict[str, float | int]) -> dict[str, float | int]:
    seen = 1 - UNSEEN_DYNAMIC_DMA
    out = {
        k: (round(v * seen) if isinstance(v, int) else v * seen) if k in _DMA_FIELDS else v for k, v in whole.items()
    }
    out["dma_active_time"] = round(out["dma_active_time"] * 1e9) * 1e-9
    out["dma_active_time_percent"] = 100 * out["dma_active_time"] / out["total_time"]
    return out


def _shares(parallelism: float, lnc: int) -> list[float]:
    """Each physical core's share of the work: a kernel running `parallelism` cores' worth at once."""
    busy = [max(0.0, min(1.0, parallelism - core)) for core in range(lnc)]
    return [b / sum(busy) for b in busy]


def per_core(whole: dict[str, float | int], w: Workload) -> list[dict[str, float | int]]:
    """The logical core's summary as one entry per physical core that combine back to it: core 0
    does the largest share and ends last; counters are split, sizes and ratios are the NEFF's."""
    if w.lnc == 1:
        return [whole]
    shares = _shares(w.cores, w.lnc)
    top = max(shares)
    entries: list[dict[str, float | int]] = []
    for core, share in enumerate(shares):
        total = whole["total_time"] * (1 - 0.002 * core)
        entry: dict[str, float | int] = {}
        for name, value in whole.items():
            if name == "total_time":
                entry[name] = round(total * 1e9) * 1e-9
            elif name == "neuroncore_cycle_count":
                entry[name] = int(value * total / whole["total_time"])
            elif name.endswith("_time"):
                entry[name] = round(value * share / top * 1e9) * 1e-9
            elif name in _SHARED or name.endswith("_percent"):
                entry[name] = value
            elif isinstance(value, int):
                entry[name] = int(value * share) + (value - sum(int(value * s) for s in shares) if core == 0 else 0)
            else:
                entry[name] = value
        entries.append(entry)
    for entry, share in zip(entries, shares, strict=True):
        for name in [k for k in entry if k.endswith("_active_time_percent")]:
            entry[name] = 100 * entry[name.removesuffix("_percent")] / entry["total_time"]
        entry["mbu_estimated_percent"] = whole["mbu_estimated_percent"] * share
        for name in _PER_CORE_UTILISATION:
            if name in whole:
                entry[name] = whole[name] * share * w.lnc
    return entries


def _in_release_units(entry: dict[str, float | int], tools: ToolsRelease) -> dict[str, float | int]:
    """The entry in the release's units and names."""
    scale = tools.time_scale
    scaled = {k: round(v * scale) if k.endswith("_time") and scale != 1.0 else v for k, v in entry.items()}
    return {_name(k, tools): v for k, v in scaled.items()}


def _name(field: str, tools: ToolsRelease) -> str:
    """A Summary field as the release spells it: 7.4.0's name, or its camelCase in a renaming schema."""
    if not tools.renamed:
        return field
    head, *rest = field.split("_")
    return head + "".join(part.title() for part in rest)


def _entry_id(record: dict, core: int) -> str:
    return f"n_{record['run_key'][:14]}{core:02d}"


def full_json(record: dict, tools: ToolsRelease, debug: dict | None = None) -> str:
    entries, info, _ = modelled(record, tools)
    rows = instruction_rows(record["ir"], whole_core(record)[0], debug)
    listed = [
        {"timestamp": r["start_ts"], "duration": r["duration_ns"], "label": f"{r['opcode']}_{r['id']}",
         "opcode": r["opcode"], "engine": r["engine"], "hlo_name": record["ir"]["kernel"],
         "nki_source_location": r["nki_source_location"]}
        for r in rows
    ]  # fmt: skip
    return json.dumps({"summary": [{**e, **info} for e in entries], "instruction": listed})


def summary_json(record: dict, tools: ToolsRelease) -> str:
    entries, info, _ = modelled(record, tools)
    fractions = [{k: (v / 100 if k.endswith("_percent") else v) for k, v in e.items()} for e in entries]
    return json.dumps({_entry_id(record, i): {**f, **info} for i, f in enumerate(fractions)}, indent=1)


def summary_text(record: dict, tools: ToolsRelease) -> str:
    entries, info, _ = modelled(record, tools)
    blocks = [
        f"{_entry_id(record, i)}\n" + "\n".join(f"{k:<45} {v}" for k, v in {**e, **info}.items())
        for i, e in enumerate(entries)
    ]
    return "\n\n".join(blocks)


def units(tools: ToolsRelease) -> dict[str, str]:
    """Each Summary field's unit, as the release's schema states it."""

    suffixes = {"_time": tools.time_unit, "_percent": "percent", "_bytes": "bytes", "_flops": "flops",
                "_cycle_count": "cycles"}  # fmt: skip

    def unit(name: str) -> str:
        return next((found for suffix, found in suffixes.items() if name.endswith(suffix)), "")

    return {_name(name, tools): unit(name) for name, _ in SUMMARY_FIELDS}


def schema_printout(tools: ToolsRelease) -> str:
    """`--show-profile-schema`: the Summary table of the release's schema as OpenAPI YAML."""
    import yaml  # deferred: only this command prints YAML

    kinds = {_name(name, tools): kind for name, kind in SUMMARY_FIELDS}
    properties = {
        name: {"type": "integer" if kinds[name] is int or unit == "nanoseconds" else "number", "x-unit": unit}
        for name, unit in units(tools).items()
    }
    document = {
        "openapi": "3.0.3",
        "info": {"title": "Neuron Explorer profile schema (simulated)", "version": tools.schema_version},
        "components": {"schemas": {"Summary": {"type": "object", "properties": properties}}},
    }
    return yaml.safe_dump(document, sort_keys=False)


def write_parquet(record: dict, folder: Path, tools: ToolsRelease, debug: dict | None = None) -> None:
    # Deferred: pyarrow is heavy and only this format needs it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    entries, info, _ = modelled(record, tools)
    w = workload(record["ir"])
    metadata = {
        "tensor_engine_num_rows": TENSOR_ENGINE_SIZE,
        "tensor_engine_num_cols": TENSOR_ENGINE_SIZE,
        "tensor_engine_clock_freq": w.platform.tensor_engine_clock_hz,
        "hbm_ddr_bandwidth": w.platform.hbm_bandwidth(w.lnc),
        **info,
        "profile_schema_version": tools.schema_version,
        "ntff_version": record["ntff_version"],
    }
    schema_fields = [{"table": "Summary", "field": n, "unit": u} for n, u in units(tools).items()]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(entries), folder / "Summary.parquet")
    pq.write_table(pa.Table.from_pylist([metadata]), folder / "Metadata.parquet")
    pq.write_table(pa.Table.from_pylist(schema_fields), folder / "SchemaFields.parquet")
    rows = instruction_rows(record["ir"], whole_core(record)[0], debug)
    pq.write_table(pa.Table.from_pylist(rows, schema=instruction_schema()), folder / "Instruction.parquet")
    warning = dma_warning(record)
    if warning:
        pq.write_table(
            pa.Table.from_pylist([{"message": warning, "category": "Missing Data"}]), folder / "Warning.parquet"
        )
