"""Several summary entries (one per physical core at LNC=2) read as one logical core, and fields
read through the schema their profile or profiler states (kernelsweep.profiles.entries, profile_schema)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kernelsweep.profiles.metrics import read_profile
from kernelsweep.profiles.schema import FIELD_NAMES, SummarySchema, from_printout, to_reference

# Two cores of seed 000's MLP as summary-json writes them: seconds, percents as fractions.
CORE_0 = {
    "total_time": 4.0e-05, "neuroncore_cycle_count": 48000, "hardware_flops": 300, "transpose_flops": 20,
    "hbm_read_bytes": 1000, "hbm_write_bytes": 200, "tensor_engine_active_time": 2.0e-05,
    "tensor_engine_active_time_percent": 0.5, "mbu_estimated_percent": 0.03, "mfu_estimated_percent": 0.08,
    "inputs_outputs_weights_size_bytes": 5000, "mm_arithmetic_intensity": 0.2333, "peak_flops_bandwidth_ratio": 27.0,
    "instance_type": "trn2.48xlarge",
}  # fmt: skip
CORE_1 = {
    **CORE_0, "total_time": 3.9e-05, "neuroncore_cycle_count": 46800, "hardware_flops": 100, "transpose_flops": 0,
    "hbm_read_bytes": 600, "hbm_write_bytes": 200, "tensor_engine_active_time": 1.0e-05,
    "tensor_engine_active_time_percent": 0.2564, "mbu_estimated_percent": 0.02, "mfu_estimated_percent": 0.04,
}  # fmt: skip


def write(path: Path, *entries: dict) -> Path:
    path.write_text(json.dumps({f"n_core{i}": entry for i, entry in enumerate(entries)}))
    return path


def test_two_cores_combine_into_the_logical_core(tmp_path):
    metrics = read_profile(write(tmp_path / "p.json", CORE_0, CORE_1))
    v = metrics.values
    assert metrics.entries == 2 and metrics.percent_unit == "fraction"
    assert v["total_time_us"] == pytest.approx(40.0) and v["neuroncore_cycle_count"] == 48000  # the slower core
    assert (v["hardware_flops"], v["transpose_flops"], v["hbm_read_bytes"]) == (400, 20, 1600)  # summed
    assert v["tensor_engine_active_time_us"] == pytest.approx(20.0)
    assert v["tensor_engine_active_time_percent"] == pytest.approx(50.0)  # recomputed: 20 us of 40 us
    assert v["mbu_estimated_percent"] == pytest.approx(5.0)  # one HBM stack's bandwidth, both cores' bytes
    assert v["mfu_estimated_percent"] == pytest.approx(6.0)  # each core's TensorE: the mean
    assert v["mm_arithmetic_intensity"] == pytest.approx(380 / 2000)  # (hw - transpose) / HBM bytes, recomputed
    assert v["inputs_outputs_weights_size_bytes"] == 5000 and v["peak_flops_bandwidth_ratio"] == 27.0  # the NEFF's


def test_one_entry_is_read_as_it_is(tmp_path):
    one = read_profile(write(tmp_path / "p.json", CORE_1))
    assert one.entries == 1 and one.values["tensor_engine_active_time_percent"] == pytest.approx(25.64)
    assert one.values["mm_arithmetic_intensity"] == pytest.approx(0.2333)  # not recomputed


def test_entries_in_full_json_and_parquet_combine_alike(tmp_path):
    (tmp_path / "full.json").write_text(json.dumps({"summary": [CORE_0, CORE_1], "instruction": []}))
    pq.write_table(pa.Table.from_pylist([CORE_0, CORE_1]), tmp_path / "Summary.parquet")
    summary = read_profile(write(tmp_path / "p.json", CORE_0, CORE_1)).values
    for path in (tmp_path / "full.json", tmp_path / "Summary.parquet"):
        values = read_profile(path).values  # percents read as fractions here too: the pairs decide
        assert values == pytest.approx(summary), path


SCHEMA_12_PRINTOUT = """\
openapi: 3.0.3
info: {title: Neuron Explorer profile schema, version: 12.0.1}
components:
  schemas:
    Summary:
      type: object
      properties:
        total_time: {type: integer, x-unit: nanoseconds}
        tensor_engine_active_time: {type: integer, x-unit: nanoseconds}
        hardware_flops: {type: integer, x-unit: flops}
"""


def test_the_profilers_printout_states_the_units_and_version():
    schema = from_printout(SCHEMA_12_PRINTOUT)
    assert (schema.version, schema.major, schema.units["total_time"]) == ("12.0.1", 12, "nanoseconds")
    assert "dma_active_time" in schema.missing() and "total_time" not in schema.missing()
    record = to_reference({"total_time": 45257, "hardware_flops": 7, "model_flops": 3}, schema)
    assert record == {"total_time": 45257 * 1e-9, "hardware_flops": 7, "model_flops": 3}
    assert from_printout("not: [a schema") is None and from_printout("openapi: 3.0.3\n") is None


def test_a_summary_json_in_nanoseconds_reads_as_the_reference_does(tmp_path):
    ns = {k: round(v * 1e9) if k.endswith("_time") else v for k, v in CORE_0.items()}
    reference = read_profile(write(tmp_path / "s.json", {**CORE_0, "total_time": 45257 * 1e-9})).values
    nanoseconds = read_profile(write(tmp_path / "ns.json", {**ns, "total_time": 45257}),
                               schema=from_printout(SCHEMA_12_PRINTOUT)).values  # fmt: skip
    assert nanoseconds == reference


def test_renamed_fields_come_back_under_their_reference_names(monkeypatch):
    """The map keyed by MAJOR version: a rename a host reports is one line in FIELD_NAMES."""
    monkeypatch.setitem(FIELD_NAMES, 12, {"total_time": "device_time"})
    renamed = to_reference({"device_time": 1.0}, SummarySchema("12.0.1"))
    assert renamed == {"total_time": 1.0}
    assert to_reference({"device_time": 1.0}, SummarySchema("7.4.0")) == {"device_time": 1.0}
    assert SummarySchema("13.2.0").names() == {"device_time": "total_time"}  # newer: the newest map known
