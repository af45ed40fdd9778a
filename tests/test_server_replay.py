"""The server replay's fixture (benchmarks/replay_calls.py): a recorded shard's calls are cut into its
flow run's and one point's, each a template a replayed run or point fills with ids of its own, the
server's ids taken from its answers; the committed recording holds a whole point of a 32-point shard
(its task runs' events came through the websocket) and the flow run's calls around it."""

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
TASK_RUNS = ["0b7c1f3a-4444-4a2b-8c3d-00000000000%d" % n for n in range(4)]


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


def _shard() -> list:
    """A two-point shard: the run's calls, each point's task-run event, the run's final state."""
    e = calls.Exchange
    points = [
        e(
            "ws",
            4.0 + n,
            "WS",
            "/api/events/in",
            json.dumps(
                {
                    "id": TASK_RUNS[n],
                    "occurred": f"2026-11-28T04:00:0{5 + n}Z",
                    "related": f"prefect.flow-run.{RUN}",
                    "point": n % 2,
                }
            ),
        )  # fmt: skip
        for n in range(4)
    ]
    state = e("http", 9.0, "POST", f"/api/flow_runs/{RUN}/set_state", json.dumps({"type": "COMPLETED"}), 201, "{}")
    return [*_recording(), *points, state]


def _points_of(exchanges: list) -> list:
    return [json.loads(x.body).get("point") if x.kind == "ws" else None for x in exchanges]


def test_a_shard_is_cut_into_its_runs_calls_and_one_points():
    fixture = calls.split_shard(_shard(), _points_of)
    assert fixture.points_per_run == 2
    assert [s.route for s in fixture.run_open][-1] == "/api/flow_runs/{id}"
    assert [s.route for s in fixture.run_close] == ["/api/flow_runs/{id}/set_state"]
    assert len(fixture.point) == 2  # the first point's two events, not the other point's
    run = calls.PointIds(now=datetime(2030, 1, 1))
    assert run.bind(fixture.run_open[0], json.dumps({"id": FLOW})) and run.bind(
        fixture.run_open[1], json.dumps({"id": "a" * 8 + RUN[8:]})
    )
    point = run.section(now=datetime(2030, 1, 2))
    first, second = (json.loads(point.fill(s.body)) for s in fixture.point)
    assert first["related"] == second["related"] == "prefect.flow-run." + "a" * 8 + RUN[8:]  # the run's flow run
    assert first["id"] not in TASK_RUNS and first["id"] != second["id"]
    assert first["occurred"] == "2030-01-02T00:00:00.000000Z"  # on the point's own clock
    assert run.section().fill(fixture.run_close[0].path) == f"/api/flow_runs/{'a' * 8 + RUN[8:]}/set_state"


def test_server_ids_are_bound_from_answers_and_client_ids_are_fresh_per_point():
    steps = calls.template(_recording())
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


def test_the_committed_recording_is_a_whole_point_of_a_shard_a_replay_can_follow():
    fixture = calls.load_fixture((REPO / "benchmarks" / "point_calls.json").read_text())
    assert fixture.points_per_run == 32
    events = [json.loads(s.body)["event"] for s in fixture.point]
    # a point is its five stage task runs (trace, compile, inputs, capture, extract), each Pending,
    # Running, Completed, sent on the events websocket, and nothing else
    assert sorted(events) == sorted(
        ["prefect.task-run.Pending", "prefect.task-run.Running", "prefect.task-run.Completed"] * 5
    )
    assert "POST /api/flow_runs/" in {f"{s.method} {s.route}" for s in fixture.run_open}
    assert fixture.run_close[-1].route == "/api/flow_runs/{id}/set_state"
    bound: set[str] = set()
    for step in [*fixture.run_open, *fixture.point, *fixture.run_close]:
        for key in re.findall(r"\{id:(\d+)\}", step.path.split("?")[0]):  # an id in a path is one the server made
            assert key in bound, f"{step.route} uses id {key} before any answer gave it"
        bound |= {key for _, key in step.binds}
    create = next(s for s in fixture.run_open if (s.method, s.route) == ("POST", "/api/flow_runs/"))
    flow_run = next(key for where, key in create.binds if where == ["id"])
    assert all(f"{{id:{flow_run}}}" in s.body for s in fixture.point)  # its events name the run's flow run
