"""The server replay's fixture (benchmarks/replay_calls.py): a recorded point's calls become a template
each replayed point fills with ids of its own, the server's ids taken from its answers, and the
committed recording holds a whole point (its task runs' events came through the websocket)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("replay_calls", REPO / "benchmarks" / "replay_calls.py")
assert _spec and _spec.loader
calls = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = calls
_spec.loader.exec_module(calls)

FLOW = "0b7c1f3a-1111-4a2b-8c3d-000000000001"
RUN = "0b7c1f3a-2222-4a2b-8c3d-000000000002"
EVENT = "0b7c1f3a-3333-4a2b-8c3d-000000000003"


def _recording() -> list:
    e = calls.Exchange
    return [
        e("http", 1.0, "POST", "/api/flow_runs/", json.dumps({"flow_id": FLOW}), 201, json.dumps({"id": RUN})),
        e("http", 0.5, "POST", "/api/flows/", json.dumps({"name": "sweep"}), 201, json.dumps({"id": FLOW})),
        e(
            "ws",
            2.0,
            "WS",
            "/api/events/in",
            json.dumps({"id": EVENT, "occurred": "2026-11-28T04:00:03.250000Z", "resource": f"prefect.flow-run.{RUN}"}),
        ),  # fmt: skip
        e("http", 3.0, "GET", f"/api/flow_runs/{RUN}", "", 200, json.dumps({"id": RUN, "t": "2026-11-28T04:00:01"})),
    ]


def test_steps_follow_the_clients_order_with_routes_and_sizes():
    steps = calls.template(_recording())
    assert [(s.method, s.route) for s in steps] == [
        ("POST", "/api/flows/"),
        ("POST", "/api/flow_runs/"),
        ("WS", "/api/events/in"),
        ("GET", "/api/flow_runs/{id}"),
    ]
    assert steps[0].request_bytes == len(json.dumps({"name": "sweep"}))
    assert steps[1].response_bytes == len(json.dumps({"id": RUN}))


def test_server_ids_are_bound_from_answers_and_client_ids_are_fresh_per_point():
    steps = calls.load_steps(calls.dump(calls.template(_recording()), "test"))
    assert RUN not in json.dumps([s.__dict__ for s in steps])  # no recorded id survives
    replayed = []
    for flow, run in (("f" * 8 + FLOW[8:], "a" * 8 + RUN[8:]), ("e" * 8 + FLOW[8:], "b" * 8 + RUN[8:])):
        point = calls.PointIds(now=datetime(2030, 1, 1))
        assert point.bind(steps[0], json.dumps({"id": flow}))
        assert json.loads(point.fill(steps[1].body)) == {"flow_id": flow}
        assert point.bind(steps[1], json.dumps({"id": run}))
        event = json.loads(point.fill(steps[2].body))
        assert event["resource"] == f"prefect.flow-run.{run}"
        assert point.fill(steps[3].path) == f"/api/flow_runs/{run}"
        replayed.append(event)
    assert replayed[0]["id"] != replayed[1]["id"] and calls.UUID.fullmatch(replayed[0]["id"])
    # times keep their offsets from the recording's earliest (04:00:01), on the replay's clock
    assert replayed[0]["occurred"] == "2030-01-01T00:00:02.250000Z"


def test_an_answer_without_the_id_where_it_was_is_reported():
    steps = calls.template(_recording())
    assert not calls.PointIds().bind(steps[0], json.dumps({"detail": "not found"}))
    assert not calls.PointIds().bind(steps[0], "<html>")


def test_the_committed_recording_is_a_whole_point_a_replay_can_follow():
    steps = calls.load_steps((REPO / "benchmarks" / "point_calls.json").read_text())
    events = [json.loads(s.body).get("event", "") for s in steps if s.kind == "ws"]
    # six task runs (docs/fleet.md's "Database retention"), each Pending, Running, Completed, sent on
    # the events websocket
    assert sum(e.startswith("prefect.task-run.") for e in events) == 18
    assert {"POST /api/flow_runs/", "POST /api/flow_runs/{id}/set_state"} <= {f"{s.method} {s.route}" for s in steps}
    bound: set[str] = set()
    for step in steps:
        for key in re.findall(r"\{id:(\d+)\}", step.path.split("?")[0]):  # an id in a path is one the server made
            assert key in bound, f"{step.route} uses id {key} before any answer gave it"
        bound |= {key for _, key in step.binds}
