"""kernelsweep.profiles.metrics: profile summaries of every format normalise to one record.

Golden numbers come from real profiles: seed 000 (trn2, full JSON, percents) and seed 002 (trn1,
summary-json, fractions).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kernelsweep.errors import ExtractError
from kernelsweep.profiles.metrics import (
    METRIC_FIELDS,
    ProfileMetrics,
    normalise_record,
    read_profile,
)

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"
SEED000_JSON = FIXTURES / "seed000_full.json"
SEED000_INSTRUCTION_FIRST = FIXTURES / "seed000_instruction_first.json"
SEED002_SUMMARY_JSON = FIXTURES / "seed002_summary.json"

# Explorer schema 7.4.0 summary fields, as the profiler spells them.
ENGINE_GROUP = ("instruction_time", "active_time", "active_time_percent", "instruction_count")
REFERENCE_FIELDS = [
    "total_time",
    "neuroncore_cycle_count",
    "model_flops",
    "hardware_flops",
    "transpose_flops",
    "adjusted_hardware_flops",
    "adjusted_transpose_flops",
    "mm_arithmetic_intensity",
    "peak_flops_bandwidth_ratio",
    "trace_count",
    "event_count",
    "dma_active_time",
    "dma_active_time_percent",
    "dma_transfer_total_bytes",
    "dma_transfer_count",
    "inputs_outputs_weights_size_bytes",
    "weight_size_bytes",
    "mbu_estimated_percent",
    "hbm_write_bytes",
    "hbm_read_bytes",
    "sbuf_write_bytes",
    "sbuf_read_bytes",
    "spill_save_bytes",
    "spill_reload_bytes",
    "psum_write_bytes",
    "psum_read_bytes",
    "tensor_engine_instruction_time",
    "tensor_engine_active_time",
    "tensor_engine_active_time_percent",
    "tensor_engine_instruction_count",
    "matmul_instruction_count",
    "mfu_estimated_percent",
    "mfu_max_achievable_estimated_percent",
    "hfu_estimated_percent",
    "cc_op_time",
    "total_exec_time",
    "total_active_time",
    "total_active_time_percent",
] + [f"{engine}_engine_{field}" for engine in ("vector", "scalar", "sync", "gpsimd") for field in ENGINE_GROUP]

SEED000_FLOATS = {
    "total_time_us": 45.26,
    "tensor_engine_active_time_us": 20.70,
    "tensor_engine_active_time_percent": 45.74,
    "dma_active_time_us": 20.46,
    "dma_active_time_percent": 45.20,
    "vector_engine_active_time_us": 9.38,
    "vector_engine_active_time_percent": 20.72,
    "scalar_engine_active_time_us": 6.53,
    "scalar_engine_active_time_percent": 14.43,
    "gpsimd_engine_active_time_us": 4.74,
    "gpsimd_engine_active_time_percent": 10.47,
    "sync_engine_active_time_us": 3.92,
    "sync_engine_active_time_percent": 8.66,
    "mfu_estimated_percent": 5.66,
    "mfu_max_achievable_estimated_percent": 26.89,
    "mm_arithmetic_intensity": 59.08,
}
SEED000_INTS = {
    "neuroncore_cycle_count": 54307,
    "hardware_flops": 427819008,
    "matmul_instruction_count": 72,
    "event_count": 1025,
    "trace_count": 3458,
    "hbm_read_bytes": 6553600,
    "hbm_write_bytes": 262144,
    "sbuf_read_bytes": 326656,
    "sbuf_write_bytes": 6564864,
    "inputs_outputs_weights_size_bytes": 3670016,
}
METADATA = {
    "instance_type": "trn2.48xlarge",
    "compiler_version": "2.21.18209.0",
    "runtime_version": "2.27.23",
    "profile_schema_version": "7.4.0",
    "ntff_version": "5",
    "tensor_engine_clock_freq": "1400000000",
    "hbm_ddr_bandwidth": "2900000000000",
}

# A minimal record whose engine pair pins the unit: 25 us of 100 us is 0.25 or 25 %.
PAIRED_FRACTION = {
    "total_time": 1e-4,
    "vector_engine_active_time": 2.5e-5,
    "vector_engine_active_time_percent": 0.25,
    "mfu_estimated_percent": 0.05,
}
PAIRED_PERCENT = {
    **PAIRED_FRACTION,
    "vector_engine_active_time_percent": 25.0,
    "mfu_estimated_percent": 5.0,
}
UNPAIRED = {"total_time": 1e-4, "mfu_estimated_percent": 0.5}


def seed000_summary() -> dict:
    return json.loads(SEED000_JSON.read_text())["summary"][0]


def assert_seed000(metrics: ProfileMetrics) -> None:
    for name, expected in SEED000_FLOATS.items():
        assert metrics.values[name] == pytest.approx(expected, abs=0.01), name
    for name, expected in SEED000_INTS.items():
        assert metrics.values[name] == expected, name
        assert type(metrics.values[name]) is int, name


def write_parquet(path: Path, rows: list[dict]) -> None:
    pq.write_table(pa.Table.from_pylist(rows), path)


def explorer_dir(tmp_path: Path, metadata_layout: str) -> Path:
    """An Explorer-style output: seed 000's summary with fractions, plus Metadata."""
    summary = {key: value / 100 if key.endswith("_percent") else value for key, value in seed000_summary().items()}
    write_parquet(tmp_path / "Summary.parquet", [summary])
    metadata = {**METADATA, "is_simulation": False}
    if metadata_layout == "key-value":
        rows = [{"key": k, "value": _text(v)} for k, v in metadata.items()]
    else:
        rows = [metadata]
    write_parquet(tmp_path / "Metadata.parquet", rows)
    return tmp_path


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- field list --------------------------------------------------------------------------------


def test_metric_fields_cover_the_reference_summary_fields() -> None:
    expected = {name + "_us" if name.endswith("_time") else name for name in REFERENCE_FIELDS}
    names = [name for name, _ in METRIC_FIELDS]
    assert set(names) == expected
    assert len(names) == len(set(names))
    assert all(kind in (int, float) for _, kind in METRIC_FIELDS)
    assert dict(METRIC_FIELDS)["hbm_read_bytes"] is int
    assert dict(METRIC_FIELDS)["total_time_us"] is float


# --- golden profiles ---------------------------------------------------------------------------


def test_full_json_golden_seed000() -> None:
    metrics = read_profile(SEED000_JSON)
    assert metrics.source_format == "json"
    assert metrics.percent_unit == "percent"
    assert set(metrics.values) == {name for name, _ in METRIC_FIELDS}
    assert_seed000(metrics)
    assert metrics.values["total_time_us"] == pytest.approx(45.256596)
    assert metrics.values["model_flops"] is None  # not in this profile
    assert metrics.extra == {}


def test_full_json_instruction_before_summary_is_streamed() -> None:
    metrics = read_profile(SEED000_INSTRUCTION_FIRST)
    assert metrics.source_format == "json"
    assert metrics.values == read_profile(SEED000_JSON).values


def test_full_json_reading_stops_after_the_summary_list(tmp_path: Path) -> None:
    """Every summary entry is read (one per physical core at LNC=2), then nothing more: a truncated
    tail after the list (as in a huge file) is never reached, while a list cut short is an error."""
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"summary": [seed000_summary()], "instruction": [{}]})[:-3] + ', {"total_time": ')
    assert_seed000(read_profile(path, "json"))
    path.write_text(json.dumps({"summary": [seed000_summary()]})[:-2] + ', {"total_time": ')
    with pytest.raises(ExtractError, match="not valid JSON"):
        read_profile(path, "json")


def test_summary_json_seed002_fractions() -> None:
    metrics = read_profile(SEED002_SUMMARY_JSON)
    assert metrics.source_format == "summary-json"
    assert metrics.percent_unit == "fraction"
    values = metrics.values
    assert values["total_time_us"] == pytest.approx(213808.05, abs=0.01)
    assert values["vector_engine_active_time_percent"] == pytest.approx(96.45, abs=0.01)
    assert values["tensor_engine_active_time_percent"] == pytest.approx(2.2616e-4, rel=1e-3)
    assert values["total_active_time_percent"] == pytest.approx(97.40, abs=0.01)
    assert values["tensor_engine_active_time_us"] == pytest.approx(0.483557)
    assert values["hbm_read_bytes"] == 6582249472
    assert values["sync_engine_instruction_count"] == 52223
    assert values["sync_engine_active_time_us"] is None
    assert metrics.info == {
        "instance_type": "trn1.2xlarge",
        "compiler_version": "2.24.5133.0+58f8de22",
        "runtime_version": "2.31.24 (0b044)",
        "profiler_version": "2.29.18.0%kaena-tools/2.29@d5fe7ba",
    }


def test_summary_json_bare_record(tmp_path: Path) -> None:
    record = next(iter(json.loads(SEED002_SUMMARY_JSON.read_text()).values()))
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(record))
    metrics = read_profile(path)
    assert metrics.source_format == "summary-json"
    assert metrics.values == read_profile(SEED002_SUMMARY_JSON).values


@pytest.mark.parametrize("metadata_layout", ["key-value", "wide"])
@pytest.mark.parametrize("point_at", ["directory", "summary-file"])
def test_parquet_matches_full_json_golden(tmp_path: Path, metadata_layout: str, point_at: str) -> None:
    directory = explorer_dir(tmp_path, metadata_layout)
    target = directory if point_at == "directory" else directory / "Summary.parquet"
    metrics = read_profile(target)
    golden = read_profile(SEED000_JSON)
    assert metrics.source_format == "parquet"
    assert metrics.percent_unit == "fraction"
    assert metrics.values.keys() == golden.values.keys()
    for name, expected in golden.values.items():
        if isinstance(expected, float):
            assert metrics.values[name] == pytest.approx(expected), name
        else:
            assert metrics.values[name] == expected, name
    assert metrics.info == {**METADATA, "is_simulation": "false"}


def test_parquet_without_metadata(tmp_path: Path) -> None:
    write_parquet(tmp_path / "Summary.parquet", [seed000_summary()])
    metrics = read_profile(tmp_path)
    assert metrics.percent_unit == "percent"
    assert metrics.info == {}
    assert_seed000(metrics)


def test_parquet_nulls_and_nan_are_missing(tmp_path: Path) -> None:
    write_parquet(
        tmp_path / "Summary.parquet",
        [{"total_time": 1e-4, "hbm_read_bytes": None, "mfu_estimated_percent": math.nan}],
    )
    values = read_profile(tmp_path).values
    assert values["total_time_us"] == pytest.approx(100.0)
    assert values["hbm_read_bytes"] is None
    assert values["mfu_estimated_percent"] is None


# --- percent units -----------------------------------------------------------------------------


@pytest.mark.parametrize("source_format", ["json", "summary-json", "parquet"])
@pytest.mark.parametrize(("record", "unit"), [(PAIRED_FRACTION, "fraction"), (PAIRED_PERCENT, "percent")])
def test_percent_unit_is_detected_from_a_redundant_pair(record: dict, unit: str, source_format: str) -> None:
    metrics = normalise_record(record, source_format)
    assert metrics.percent_unit == unit
    assert metrics.values["vector_engine_active_time_percent"] == pytest.approx(25.0)
    assert metrics.values["mfu_estimated_percent"] == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("source_format", "unit", "mfu"),
    [("summary-json", "fraction", 50.0), ("json", "percent", 0.5), ("parquet", "percent", 0.5)],
)
def test_percent_unit_falls_back_to_the_format_default(source_format: str, unit: str, mfu: float) -> None:
    metrics = normalise_record(UNPAIRED, source_format)
    assert metrics.percent_unit == unit
    assert metrics.values["mfu_estimated_percent"] == pytest.approx(mfu)


def test_a_percent_above_one_cannot_be_a_fraction() -> None:
    metrics = normalise_record({"mfu_estimated_percent": 5.66}, "summary-json")
    assert metrics.percent_unit == "percent"
    assert metrics.values["mfu_estimated_percent"] == pytest.approx(5.66)


def test_zero_times_do_not_decide_the_unit() -> None:
    record = {**UNPAIRED, "tensor_engine_active_time": 0.0, "tensor_engine_active_time_percent": 0}
    assert normalise_record(record, "json").percent_unit == "percent"
    assert normalise_record(record, "summary-json").percent_unit == "fraction"


def test_a_pair_matching_neither_unit_does_not_decide() -> None:
    """3 is neither 0.25 nor 25: that percent is relative to something else, so no verdict."""
    record = {**PAIRED_FRACTION, "vector_engine_active_time_percent": 3.0}
    metrics = normalise_record(record, "summary-json")
    assert metrics.percent_unit == "percent"  # from the value above 1, not from the pair
    record = {**PAIRED_FRACTION, "vector_engine_active_time_percent": 0.4}
    assert normalise_record(record, "json").percent_unit == "percent"  # format default


def test_pairs_that_disagree_are_an_error() -> None:
    record = {
        **PAIRED_FRACTION,
        "scalar_engine_active_time": 5e-5,
        "scalar_engine_active_time_percent": 50.0,
    }
    with pytest.raises(ExtractError, match="disagree"):
        normalise_record(record, "json")


# --- value rules -------------------------------------------------------------------------------


def test_negative_nan_and_missing_are_none() -> None:
    record = {
        "total_time": 1e-4,
        "cc_op_time": -1,
        "hbm_read_bytes": -1,
        "mbu_estimated_percent": float("nan"),
        "hardware_flops": None,
    }
    metrics = normalise_record(record, "summary-json")
    assert metrics.values["total_time_us"] == pytest.approx(100.0)
    for name in ("cc_op_time_us", "hbm_read_bytes", "mbu_estimated_percent", "hardware_flops"):
        assert metrics.values[name] is None, name
    assert metrics.values["psum_read_bytes"] is None  # absent from the record


def test_unknown_fields_are_kept() -> None:
    record = {
        "total_time": 1e-4,
        "dma_queue_depth_max": 7,
        "dma_packet_avg_size": 512.5,
        "foo_time": 2.5e-6,
        "bar_time": -1,
        "baz_percent": 0.5,
        "notes": "warm cache",
        "is_simulation": True,
    }
    metrics = normalise_record(record, "summary-json")
    assert metrics.extra == {
        "dma_queue_depth_max": 7,
        "dma_packet_avg_size": 512.5,
        "foo_time_us": pytest.approx(2.5),
        "bar_time_us": None,
        "baz_percent": pytest.approx(50.0),
    }
    assert type(metrics.extra["dma_queue_depth_max"]) is int
    assert metrics.info == {"notes": "warm cache", "is_simulation": "true"}


def test_counts_serialised_as_floats_become_ints() -> None:
    values = normalise_record({"hardware_flops": 427819008.0}, "parquet").values
    assert values["hardware_flops"] == 427819008
    assert type(values["hardware_flops"]) is int


def test_metadata_argument_goes_to_info() -> None:
    metrics = normalise_record(
        {"total_time": 1e-4, "instance_type": "trn1.2xlarge"},
        "json",
        {"instance_type": "trn2.48xlarge", "is_simulation": 1, "ntff_version": None},
    )
    assert metrics.info == {"instance_type": "trn2.48xlarge", "is_simulation": "true"}


def test_as_dict_is_flat_and_json_able() -> None:
    metrics = read_profile(SEED002_SUMMARY_JSON)
    row = metrics.as_dict()
    assert json.loads(json.dumps(row)) == row
    assert row["total_time_us"] == metrics.values["total_time_us"]
    assert row["instance_type"] == "trn1.2xlarge"
    assert row["source_format"] == "summary-json"
    assert row["percent_unit"] == "fraction"
    assert len(row) == len(METRIC_FIELDS) + len(metrics.info) + 3 and row["entries"] == 1


def test_a_non_numeric_known_field_is_an_error() -> None:
    with pytest.raises(ExtractError, match="'hbm_read_bytes' should be a number"):
        normalise_record({"hbm_read_bytes": "lots"}, "json")


def test_unknown_field_colliding_with_a_metric_name_is_an_error() -> None:
    with pytest.raises(ExtractError, match="collides"):
        normalise_record({"total_time_us": 5.0}, "json")


# --- format detection and errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "source_format"),
    [(SEED000_JSON, "json"), (SEED000_INSTRUCTION_FIRST, "json"), (SEED002_SUMMARY_JSON, "summary-json")],
)
def test_explicit_format_matches_detection(path: Path, source_format: str) -> None:
    assert read_profile(path).source_format == source_format
    assert read_profile(path, source_format) == read_profile(path)


def _assert_one_line_naming(err: pytest.ExceptionInfo[ExtractError], path: Path) -> None:
    message = str(err.value)
    assert str(path) in message
    assert "\n" not in message
    assert err.value.retryable is False
    assert err.value.stage == "extract"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(ExtractError, match="not found") as err:
        read_profile(path)
    _assert_one_line_naming(err, path)


@pytest.mark.parametrize("profile_format", [None, "json", "summary-json"])
@pytest.mark.parametrize("content", ["", "{not json", '{"summary": [{"total_time": 1e-4,'])
def test_invalid_json(tmp_path: Path, content: str, profile_format: str | None) -> None:
    path = tmp_path / "profile.json"
    path.write_text(content)
    with pytest.raises(ExtractError, match="not valid JSON") as err:
        read_profile(path, profile_format)
    _assert_one_line_naming(err, path)


@pytest.mark.parametrize(
    "document",
    [
        {"summary": [], "instruction": [{"duration": 1}]},
        {"instruction": [{"duration": 1}], "dma": []},
        {},
    ],
)
def test_no_summary_record(tmp_path: Path, document: dict) -> None:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ExtractError, match="no summary record") as err:
        read_profile(path)
    _assert_one_line_naming(err, path)


@pytest.mark.parametrize("document", [[1, 2], 3])
def test_top_level_must_be_an_object(tmp_path: Path, document: object) -> None:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ExtractError, match="not a JSON object") as err:
        read_profile(path)
    _assert_one_line_naming(err, path)


def test_full_profile_read_as_summary_json_is_an_error() -> None:
    with pytest.raises(ExtractError, match="format 'json'") as err:
        read_profile(SEED000_JSON, "summary-json")
    _assert_one_line_naming(err, SEED000_JSON)


def test_parquet_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match="cannot read Parquet") as err:
        read_profile(tmp_path)  # a directory without Summary.parquet
    _assert_one_line_naming(err, tmp_path / "Summary.parquet")

    garbage = tmp_path / "Broken.parquet"
    garbage.write_bytes(b"not parquet at all")
    with pytest.raises(ExtractError, match="cannot read Parquet") as err:
        read_profile(garbage)
    _assert_one_line_naming(err, garbage)

    empty = tmp_path / "empty"
    empty.mkdir()
    pq.write_table(pa.table({"total_time": pa.array([], pa.float64())}), empty / "Summary.parquet")
    with pytest.raises(ExtractError, match="no summary record") as err:
        read_profile(empty)
    _assert_one_line_naming(err, empty / "Summary.parquet")


def test_unknown_format_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown profile format"):
        read_profile(SEED000_JSON, "csv")
    with pytest.raises(ValueError, match="unknown profile format"):
        normalise_record({}, "csv")


# --- Bounded on any input (docs/reliability.md): each read runs in a child with its address space ---
# --- capped at 1 GiB, so a reader that is not bounded fails here instead of taking the host down. ---

BOUNDED_CHILD = """
import json, resource, sys, time
limit = int(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from kernelsweep.errors import ExtractError
from kernelsweep.profiles.metrics import read_profile
started = time.perf_counter()
try:
    read_profile(sys.argv[1])
    outcome = "read"
except ExtractError as exc:
    outcome = exc.message
except MemoryError:
    outcome = "MemoryError"
# VmHWM: this process's peak since exec (getrusage's maxrss would include the forked pytest's)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - started,
                  "peak_mb": int(status["VmHWM"].split()[0]) / 1024}))
"""
SUMMARY_TAIL = b'], "summary": [{"total_time": 4.5e-05}]}'


def _bounded_read(path: Path, address_space: int = 1 << 30) -> dict:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", BOUNDED_CHILD, str(path), str(address_space)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _write(path: Path, *parts: bytes, repeat: tuple[bytes, int] | None = None) -> Path:
    with open(path, "wb") as handle:
        handle.write(parts[0])
        if repeat:
            for _ in range(repeat[1]):
                handle.write(repeat[0])
        for part in parts[1:]:
            handle.write(part)
    return path


PATHOLOGICAL = {
    # One 64 MiB string in a table before the summary: ijson's parser slows quadratically on it.
    "huge-string": lambda p: _write(p, b'{"instruction": [{"x": "', SUMMARY_TAIL.replace(b"]", b'"}]', 1),
                                    repeat=(b"a," * (1 << 19), 64)),
    "huge-number": lambda p: _write(p, b'{"instruction": [1', SUMMARY_TAIL, repeat=(b"0" * (1 << 20), 64)),
    "escaped-quotes": lambda p: _write(p, b'{"instruction": ["', SUMMARY_TAIL.replace(b"]", b'"]', 1),
                                       repeat=(b'\\"' * (1 << 19), 32)),
    # 100k levels in 500 KB: ijson's path prefixes grow with depth (gigabytes).
    "deep-nesting": lambda p: _write(p, b'{"a": ' + b'["x",' * 100_000 + b"1" + b"]" * 100_000 + SUMMARY_TAIL[1:]),
    "deep-summary": lambda p: _write(p, b'{"summary": [{"total_time": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000
                                     + b"}]}"),
    "wide-summary": lambda p: _write(p, b'{"summary": [{"total_time": 1' + b"".join(
        b', "f%d": %d' % (i, i) for i in range(200_000)) + b"}]}"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(PATHOLOGICAL))
def test_pathological_json_is_refused_quickly_in_little_memory(tmp_path: Path, case: str) -> None:
    result = _bounded_read(PATHOLOGICAL[case](tmp_path / "profile.json"))
    assert result["outcome"].startswith(str(tmp_path / "profile.json")), result
    bounds = ("single value over", "without a string", "nested more than", "more than 4096")
    assert any(word in result["outcome"] for word in bounds)
    assert result["seconds"] < 10 and result["peak_mb"] < 200, result


def test_a_summary_table_of_millions_of_rows_is_refused_from_its_footer(tmp_path: Path) -> None:
    """Every Summary row is an entry to combine, so a table of millions is refused before decoding."""
    n = 2_000_000
    table = pa.table({"total_time": pa.array([4.5e-05] * n), "label": pa.array([f"row {i}" for i in range(n)])})
    pq.write_table(table, tmp_path / "Summary.parquet", row_group_size=n)
    result = _bounded_read(tmp_path / "Summary.parquet", address_space=0)  # pyarrow reserves address space
    assert "has 2000000 rows" in result["outcome"] and result["peak_mb"] < 400, result


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("table.json", {"rows": [{"a": 1}, {"a": 2}], "summary": [{"colour": "red", "n": 3}]}),
        ("record.json", {"colour": "red", "n": 3}),
        ("keyed.json", {"p1": {"colour": "red"}}),
    ],
)
def test_json_with_none_of_the_summary_fields_is_not_a_profile(tmp_path: Path, name: str, content: dict) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(content))
    with pytest.raises(ExtractError, match="none of the profile summary fields") as err:
        read_profile(path)
    _assert_one_line_naming(err, path)


def test_a_table_with_none_of_the_summary_fields_is_not_a_profile(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), tmp_path / "data.parquet")
    with pytest.raises(ExtractError, match="none of the profile summary fields"):
        read_profile(tmp_path / "data.parquet")


def test_a_pipe_is_refused_not_read_for_ever(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo")
    result = _bounded_read(tmp_path / "fifo", address_space=0)  # in a child: a reader that blocks fails here
    assert "is not a regular file" in result["outcome"]
