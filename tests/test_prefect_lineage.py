"""Lineage in Prefect: one lineage list per flow run carrying every point's artifacts, a summary
table, and the results' asset event naming the artifact store they were made from."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
from specs import sim_spec
from stage_context import point, sim_context
from ui_width import markdown_tables

from kernelsweep.errors import CompileError
from kernelsweep.flows.ui import SINGLE_ARTIFACTS, asset_key, lineage_line, upstream_asset_keys
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
        (lineage,) = _of_run(history, second.flow_run_id)
        items = [line for line in lineage.data.splitlines() if line.startswith("- ")]
        assert lineage.type == "markdown" and len(items) == len(rows)  # this run's rows only
        for row in rows.values():
            [item] = [line for line in items if f"row `{row['row_id']}`" in line]
            assert f"**{row['kernel']} {row['shape']}" in item and f"ok, {row['total_time_us']:g} us" in item
            for name in SINGLE_ARTIFACTS:  # each by its content address, shortened
                assert f"{name} `{row[f'{name}_uri'].rsplit('/', 1)[-1][:12]}`" in item
            assert f"neff `{row['neff_sha256'][:12]}`" in item
            assert all(f"inputs[{ref['name']}] `" in item for ref in row["inputs"])
        assert not markdown_tables(lineage.data)  # a list the UI wraps, not a table it cuts off
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
    item = lineage_line(row)
    assert f": {row.status}: CompilerDiagnostic: [NCC_EVRF009] too big; row `{row.row_id}`;" in item
    assert row.status != "ok" and row.trace_cache_hit is False
    assert f"ir `{row.ir_uri.rsplit('/', 1)[-1][:12]}`" in item  # made before the failure
    assert not any(f"{name} `" in item for name in ("ntff", "profile", "outputs"))
    assert item.startswith(f"**vector_add {row.shape} float32 trn2**")
    assert max(len(word.strip("`*,;")) for word in item.split()) <= 40  # every word fits a line of the UI
