"""Lineage in Prefect: keyed per-point artifacts with history, a summary table, asset events."""

from __future__ import annotations

import time

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
from specs import sim_spec

from kernelsweep.flows.ui import artifact_key, asset_key

pytestmark = pytest.mark.usefixtures("prefect_harness")
EVENT_WAIT_SECONDS = 60


# a shape no other test sweeps, so its lineage key holds only this test's runs
KERNEL = {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"], "grid": {"n": [3072]}}


def _artifacts(client, key):
    return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))


def test_point_history_summary_table_and_asset_event(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = sim_spec(tmp_path, [KERNEL], name="lineage-test")
    first, second = sweep(spec), sweep(spec)
    key = artifact_key("lineage", "vector_add", "n=3072,partition_size=128,free_size=1", "float32", "trn2")
    assert key == "lineage-vector-add-n-3072-partition-size-128-free-size-1-float32-trn2"
    with get_client(sync_client=True) as client:
        history = _artifacts(client, key)
        assert {first.flow_run_id, second.flow_run_id} <= {str(a.flow_run_id) for a in history}
        newest = max((a for a in history if str(a.flow_run_id) == second.flow_run_id), key=lambda a: a.created)
        assert "neff" in newest.data and first.rows[0].row_id not in newest.data  # each run its own version
        summary = [a for a in _artifacts(client, "sweep-lineage-test") if str(a.flow_run_id) == second.flow_run_id]
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
    related = {r.id for r in events[0].related}
    assert any(r.endswith(".neff") or "/sha256/" in r for r in related)  # upstream artifacts are asset deps
