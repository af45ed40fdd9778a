"""The report flow in Prefect: keyed artifacts with history, the HTML report stored next to the
results (a folder, and S3 over moto's HTTP server) with a link to it, and the deployment
fragment's trigger checked against the real completion events of a sweep, a re-check and a report."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
from specs import sim_spec

from kernelsweep.results import reader

pytestmark = [
    pytest.mark.usefixtures("prefect_harness"),
    pytest.mark.slow,
    pytest.mark.xdist_group("report-flow"),  # one process starts the harness for them
]

DEPLOYMENTS = Path(__file__).resolve().parents[1] / "deployments" / "prefect.yaml"
EVENT_WAIT_SECONDS = 60
# a shape no other test sweeps
KERNEL = {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"], "grid": {"n": [5120]}}


def _sweep_then_report(spec) -> tuple[str, str, str]:
    """(sweep flow run id, report flow run id, where the report was stored)."""
    from kernelsweep.flows.report import report
    from kernelsweep.flows.sweep import sweep

    swept = sweep(spec)
    state = report(results_uri=spec.results, return_state=True)
    return swept.flow_run_id, str(state.state_details.flow_run_id), state.result()


def _artifacts(client, key: str, run_ids: set[str]):
    found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    return {str(a.flow_run_id): a for a in found if str(a.flow_run_id) in run_ids}


def test_keyed_artifacts_keep_history_and_the_page_is_stored_beside_the_results(tmp_path):
    from kernelsweep.flows.report import KEYS

    spec = sim_spec(tmp_path, [KERNEL], name="report-flow", capture={"num_exec": 2, "repeats": 3})
    _, first, first_page = _sweep_then_report(spec)
    sweep_id, second, page = _sweep_then_report(spec)
    assert Path(page) == Path(spec.results) / "reports" / second / "index.html" and Path(page).is_file()
    assert Path(first_page).is_file() and first_page != page  # each report keeps its own folder
    assert len(reader.read(spec.results).to_pylist()) == 2  # the dataset still reads: reports/ is outside v1/
    with get_client(sync_client=True) as client:
        for name, key in KEYS.items():
            if name == "cost":  # only a report after a fleet run says what the run cost
                assert not _artifacts(client, key, {first, second})
                continue
            assert set(_artifacts(client, key, {first, second})) == {first, second}, key  # one version per run
        summary = _artifacts(client, KEYS["summary"], {second})[second]
        assert summary.type == "table" and "vector_add" in summary.data and "n=5120" in summary.data
        link = _artifacts(client, KEYS["html"], {second})[second]
        assert Path(page).resolve().as_uri() in link.data
        site = _artifacts(client, KEYS["site"], {first, second})  # the results site, rebuilt each night
        assert (Path(spec.results) / "site" / "index.html").resolve().as_uri() in site[second].data
        assert "1 kernel(s) rebuilt" in site[first].description and "1 kernel(s) rebuilt" in site[second].description
    assert "kernelsweep report" in Path(page).read_text()


def test_on_s3_the_page_is_an_object_beside_the_results_and_the_link_names_it(tmp_path, bucket, moto_endpoint):
    from kernelsweep.flows.report import KEYS
    from kernelsweep.stores.s3 import make_client

    spec = sim_spec(tmp_path, [KERNEL], name="report-s3", results=f"s3://{bucket}/nightly")
    _, report_id, page = _sweep_then_report(spec)
    key = f"nightly/reports/{report_id}/index.html"
    assert page == f"s3://{bucket}/{key}"
    stored = make_client().get_object(Bucket=bucket, Key=key)
    assert stored["ContentType"] == "text/html" and b"kernelsweep report" in stored["Body"].read()
    with get_client(sync_client=True) as client:
        link = _artifacts(client, KEYS["html"], {report_id})[report_id]
    assert f"({moto_endpoint}/{bucket}/{key}?" in link.data  # the object on the endpoint the results live on
    assert "Signature=" in link.data and "Expires=" in link.data  # presigned: a browser opens it
    assert len(reader.read(spec.results).to_pylist()) == 1


def _completed_event(client, flow_run_id: str):
    deadline = time.monotonic() + EVENT_WAIT_SECONDS
    while time.monotonic() < deadline:  # the event persister writes asynchronously
        page = client.read_events(
            EventFilter(
                event=EventNameFilter(name=["prefect.flow-run.Completed"]),
                resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"]),
            ),
            limit=50,
        )
        if page.events:
            return page.events[0]
        time.sleep(0.2)
    raise AssertionError(f"no Completed event for flow run {flow_run_id}")


def test_the_report_deployment_is_triggered_by_a_sweep_and_a_recheck_and_not_by_a_report(tmp_path):
    from prefect.events import DeploymentEventTrigger
    from prefect.flows import load_flow_from_entrypoint
    from prefect.server.events.schemas.automations import EventTrigger
    from prefect.server.events.schemas.events import ReceivedEvent

    from kernelsweep.flows.recheck import recheck_flow

    [entry] = [d for d in yaml.safe_load(DEPLOYMENTS.read_text())["deployments"] if "report" in d.get("tags", [])]
    flow = load_flow_from_entrypoint(entry["entrypoint"])
    assert flow.name == "report" and set(entry.get("parameters", {})) <= set(flow.parameters.properties)
    [spec] = entry["triggers"]
    deployed = DeploymentEventTrigger.model_validate(spec)  # what `prefect deploy` builds from the entry
    trigger = EventTrigger.model_validate(deployed.model_dump(include=set(EventTrigger.model_fields)))

    swept_spec = sim_spec(tmp_path, [KERNEL], name="report-trigger")
    sweep_id, report_id, _ = _sweep_then_report(swept_spec)
    recheck_id = str(recheck_flow(swept_spec, return_state=True).state_details.flow_run_id)  # nothing stored
    with get_client(sync_client=True) as client:
        swept, reported = _completed_event(client, sweep_id), _completed_event(client, report_id)
        rechecked = _completed_event(client, recheck_id)
    assert trigger.covers(ReceivedEvent.model_validate(swept.model_dump()))
    assert trigger.covers(ReceivedEvent.model_validate(rechecked.model_dump()))  # one report, not one per contest
    assert not trigger.covers(ReceivedEvent.model_validate(reported.model_dump()))  # no report loop
