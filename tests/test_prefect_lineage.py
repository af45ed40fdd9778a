"""Lineage in Prefect: one lineage table per flow run carrying every point's artifacts, a summary
table, and the results' asset event naming the artifact store they were made from."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
from specs import sim_spec
from stage_context import point, sim_context
from ui_width import UI_WIDTH, least_width

from kernelsweep.errors import CompileError
from kernelsweep.flows.ui import SINGLE_ARTIFACTS, asset_key, lineage_record, upstream_asset_keys
from kernelsweep.results.rows import PointRecord, build_row
from kernelsweep.stages import trace_stage

pytestmark = pytest.mark.usefixtures("prefect_harness")
EVENT_WAIT_SECONDS = 60
KERNEL = {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"], "grid": {"n": [3072, 4096]}}


def _artifacts(client, key):
    return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))


def _of_run(artifacts, flow_run_id):
    return [a for a in artifacts if str(a.flow_run_id) == flow_run_id]


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_each_run_has_one_lineage_table_with_every_points_artifacts_and_a_summary(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = sim_spec(tmp_path, [KERNEL], name="lineage-test")
    first, second = sweep(spec), sweep(spec)
    rows = {r["row_id"]: r for r in pq.read_table(second.paths[0]).to_pylist()}
    with get_client(sync_client=True) as client:
        history = _artifacts(client, "lineage-lineage-test")
        assert len(_of_run(history, first.flow_run_id)) == 1  # one per run, not one per point
        (table,) = _of_run(history, second.flow_run_id)
        records = json.loads(table.data) if isinstance(table.data, str) else table.data
        assert table.type == "table" and {r["row_id"] for r in records} == set(rows)  # this run's rows only
        for record in records:
            row = rows[record["row_id"]]
            assert record["outcome"] == f"ok, {row['total_time_us']:g} us" and row["kernel"] in record["point"]
            for name in SINGLE_ARTIFACTS:  # each by its content address, shortened
                assert f"{name} {row[f'{name}_uri'].rsplit('/', 1)[-1][:12]}" in record["artifacts"]
            assert f"neff {row['neff_sha256'][:12]}" in record["artifacts"]
            assert all(f"inputs[{ref['name']}] " in record["artifacts"] for ref in row["inputs"])
            assert least_width([list(record), list(record.values())]) <= UI_WIDTH, record  # fits the UI
        summary = _of_run(_artifacts(client, "sweep-lineage-test"), second.flow_run_id)
        assert summary and summary[0].type == "table"

        parquet = asset_key("file://" + second.paths[0])
        deadline = time.monotonic() + EVENT_WAIT_SECONDS
        events = []
        while not events and time.monotonic() < deadline:  # the event persister writes asynchronously
            page = client.read_events(
                EventFilter(
                    event=EventNameFilter(name=["prefect.asset.materialization.succeeded"]),
                    resource=EventResourceFilter(id=[parquet]),
                ),
                limit=50,
            )  # the server caps pages at 50; the client's default of 100 is refused
            events = page.events
            time.sleep(0.2)
    assert events, f"no materialization event for {parquet}"
    assert upstream_asset_keys(spec.artifacts)[0] in {r.id for r in events[0].related}  # made from the store


def test_a_failed_points_lineage_names_its_error_and_what_was_made_before_it(tmp_path):
    ctx, p = sim_context(tmp_path), point()
    record = PointRecord(point=p, started_at=datetime.now(UTC), trace=trace_stage(ctx, p))
    record.error, record.error_stage = (
        CompileError("[NCC_EVRF009] too big", error_class="CompilerDiagnostic"),
        "compile",
    )
    row = build_row(record, flow_run_id="run-1", toolchain="sim", is_simulation=True, versions=ctx.versions)
    lineage = lineage_record(row)
    assert lineage["outcome"] == f"{row.status}: CompilerDiagnostic: [NCC_EVRF009] too big" and row.status != "ok"
    assert f"ir {row.ir_uri.rsplit('/', 1)[-1][:12]}" in lineage["artifacts"]  # made before the failure
    assert row.trace_cache_hit is False
    assert not any(f"{name} " in lineage["artifacts"] for name in ("ntff", "profile", "outputs"))
    assert lineage["point"] == "vector_add " + row.shape.replace(",", ", ") + " float32 trn2"
    assert least_width([list(lineage), list(lineage.values())]) <= UI_WIDTH, lineage  # the UI shows it whole
