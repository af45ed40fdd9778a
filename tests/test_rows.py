"""Row assembly without Prefect: the typed row matches the schema column for column, failed rows carry
what was made before the failure and no numbers, and derived figures follow from the cost model."""

from __future__ import annotations

import dataclasses
import socket
from datetime import UTC, datetime

import pytest
from stage_context import point, sim_context

from kernelsweep.errors import CompileError, DeviceBusyError, StoreError
from kernelsweep.kernels import load_kernel
from kernelsweep.platforms import get_platform
from kernelsweep.profiles.metrics import METRIC_FIELDS
from kernelsweep.report.load import COLUMNS as REPORT_COLUMNS
from kernelsweep.results.outcome import SUMMARY_COLUMNS
from kernelsweep.results.rows import PARTS, PointRecord, Row, build_row
from kernelsweep.results.schema import BASE_SCHEMA, PARAM_PREFIX, schema_for
from kernelsweep.results.writer import rows_to_table
from kernelsweep.stages import capture_stage, compile_stage, extract_stage, inputs_stage, trace_stage
from kernelsweep.toolchain.versions import ToolVersions

pytestmark = pytest.mark.xdist_group("rows")  # one process builds `full_record`

HOST = ToolVersions(
    compiler="2.99.0",
    profiler="2.98.0",
    runtime="2.97.0",
    nki="0.9",
    profiler_tool="neuron-explorer",
    instance_type="x",
    tracer="nki.compiler.driver",
)
NOW = datetime(2026, 11, 26, tzinfo=UTC)


def _row(record: PointRecord, versions: ToolVersions = HOST) -> Row:
    return build_row(record, flow_run_id="run-1", toolchain="sim", is_simulation=True, versions=versions)


@pytest.fixture(scope="module")
def full_record(tmp_path_factory) -> PointRecord:
    """A point that went through all five stages on the simulator."""
    root = tmp_path_factory.mktemp("rows")
    ctx, p = sim_context(root, repeats=2), point("mlp")
    record = PointRecord(point=p, started_at=NOW, finished_at=NOW)
    record.trace = trace_stage(ctx, p)
    record.compiled = compile_stage(ctx, p, record.trace)
    record.inputs = inputs_stage(ctx, p)
    record.captured = capture_stage(ctx, p, record.compiled, record.inputs)
    record.extracted = extract_stage(ctx, p, record.compiled, record.inputs, record.captured)
    record.task_run_ids = {"trace": "t-1"}
    return record


def test_the_row_type_and_the_schema_have_the_same_columns():
    """Adding a column to one and not the other fails here, in either direction."""
    row_fields = {f.name for f in dataclasses.fields(Row)} - {"metrics"}
    metric_names = {name for name, _ in METRIC_FIELDS}
    assert row_fields.isdisjoint(metric_names)
    assert row_fields | metric_names == set(BASE_SCHEMA.names)
    assert set(SUMMARY_COLUMNS) <= set(BASE_SCHEMA.names)


@pytest.mark.parametrize("part", PARTS, ids=lambda part: part.__name__)
def test_build_row_fills_each_part(full_record, part):
    """A part `build_row` forgot would leave all its columns null on a point that went through every stage."""
    row = _row(full_record)
    assert any(getattr(row, f.name) not in (None, {}, []) for f in dataclasses.fields(part))


def test_the_host_is_the_fleets_name_for_it_and_the_hostname_the_machines(full_record):
    """Off the fleet (no name given) both are the machine's, as `host` always was."""
    named = build_row(full_record, flow_run_id="r", toolchain="sim", is_simulation=True, versions=HOST, host="trn2-a")
    assert (named.host, named.hostname) == ("trn2-a", socket.gethostname())
    assert (_row(full_record).host, _row(full_record).hostname) == (socket.gethostname(), socket.gethostname())


def test_the_report_reads_only_columns_the_schema_has():
    assert set(REPORT_COLUMNS) - {"run_date"} <= set(BASE_SCHEMA.names)


def test_an_ok_row_fills_every_column_with_the_stage_results(full_record):
    row = _row(full_record)
    record = row.record()
    assert set(record) == set(schema_for(list(full_record.point.params)).names)
    assert record[PARAM_PREFIX + "h"] == 256 and record["shape"] == "b=1,s=128,h=256,i=128"
    assert row.status == "ok" and row.correct is True and row.repeats == 2
    assert row.total_time_us == full_record.extracted.metrics.values["total_time_us"] > 0
    assert row.neff_sha256 == full_record.compiled.neff.sha256 and row.ntff_sha256 == full_record.extracted.ntff.sha256
    assert [ref["name"] for ref in row.inputs] == list(full_record.inputs.inputs)
    assert row.task_run_ids == {"trace": "t-1"} and row.tracer == "sim-nki-frontend"
    assert rows_to_table([row], {}).num_rows == 1


def test_derived_figures_come_from_the_cost_model_and_the_platform(full_record):
    row, p = _row(full_record), full_record.point
    cost = load_kernel(p.kernel_ref).cost(p.params, p.dtype)
    platform = get_platform(p.platform)
    seconds = row.total_time_us * 1e-6
    assert row.cost_flops == cost.flops and row.cost_hbm_bytes == cost.hbm_bytes
    assert row.achieved_tflops == pytest.approx(cost.flops / seconds / 1e12)
    assert row.mfu_percent == pytest.approx(100 * cost.flops / seconds / platform.peak_flops(p.dtype, p.lnc))
    roofline = platform.roofline(cost.flops, cost.hbm_bytes, p.dtype, p.lnc)
    assert row.roofline_us == pytest.approx(roofline.seconds * 1e6) and row.roofline_bound == roofline.bound
    assert row.roofline_percent == pytest.approx(100 * roofline.seconds / seconds)


def test_what_the_profile_says_ran_wins_over_the_hosts_versions(full_record):
    """The sim's profile names its runtime, profiler and instance; the compiler stays the host's, and NKI is
    the one that traced the point (the host's only where nothing was traced)."""
    row = _row(full_record)
    info = full_record.extracted.metrics.info
    assert (row.runtime_version, row.profiler_version, row.instance_type) == (
        info["runtime_version"],
        info["profiler_version"],
        info["instance_type"],
    )
    assert (row.compiler_version, row.nki_version, row.profiler_tool) == (
        "2.99.0",
        "0.7.0+kernelsweep.sim",
        "neuron-explorer",
    )
    failed = PointRecord(point=full_record.point, started_at=NOW, error=RuntimeError("x"), error_stage="trace")
    assert _row(failed).runtime_version == "2.97.0"  # no profile: the host's
    assert (_row(failed).nki_version, _row(failed).tracer) == (
        "0.9",
        "nki.compiler.driver",
    )  # nothing traced: the host's


@pytest.mark.parametrize("stage", ["trace", "compile", "inputs", "capture", "extract"])
def test_a_failed_row_keeps_what_came_before_and_has_no_numbers(full_record, stage):
    kept = ["trace", "compiled", "inputs", "captured"][
        : ["trace", "compile", "inputs", "capture", "extract"].index(stage)
    ]
    record = PointRecord(point=full_record.point, started_at=NOW, error_stage=stage)
    for name in kept:
        setattr(record, name, getattr(full_record, name))
    record.error = CompileError("neuronx-cc failed: [NCC_EVRF009] too big", error_class="CompilerDiagnostic")
    row = _row(record)
    assert (row.status, row.error_stage, row.error_class) == ("failed", stage, "CompilerDiagnostic")
    assert row.error_message == "neuronx-cc failed: [NCC_EVRF009] too big"
    assert row.total_time_us is None and row.achieved_tflops is None and row.correct is None
    assert all(value is None for name, value in row.record().items() if name in dict(METRIC_FIELDS))
    assert row.roofline_us is not None  # known before anything runs
    assert (row.ir_sha256 is not None) == ("trace" in kept)
    assert (row.neff_sha256 is not None) == ("compiled" in kept)
    assert (row.ntff_sha256 is not None) == ("captured" in kept)
    assert rows_to_table([row], {}).num_rows == 1


def test_an_unexpected_exception_is_summarised_on_one_line(full_record):
    record = PointRecord(point=full_record.point, started_at=NOW, error_stage="capture")
    record.error = ValueError("bad\n   value\tthere")
    row = _row(record)
    assert (row.error_class, row.error_message) == ("ValueError", "bad value there")
    busy = PointRecord(point=full_record.point, started_at=NOW, error=DeviceBusyError("core 0 busy"))
    assert _row(busy).error_class == "DeviceBusyError"


def test_a_metric_the_schema_lacks_is_refused_not_dropped(full_record):
    row = _row(full_record)
    with pytest.raises(ValueError, match="latency_p95_us"):
        dataclasses.replace(row, metrics={**row.metrics, "latency_p95_us": 1.0})


def test_the_writer_refuses_a_record_with_a_column_the_schema_lacks(full_record, monkeypatch):
    row = _row(full_record)
    monkeypatch.setattr(Row, "record", lambda self: {**dataclasses.asdict(self), "misspelt_colum": 1})
    with pytest.raises(StoreError, match="misspelt_colum"):
        rows_to_table([row], {})


def test_the_row_id_is_stable_per_flow_run_and_point(full_record):
    first, again = _row(full_record), _row(full_record)
    other = build_row(full_record, flow_run_id="run-2", toolchain="sim", is_simulation=True, versions=HOST)
    assert first.row_id == again.row_id != other.row_id
