"""The fleet summary tells the night (issue 35): Neuron-host-hours split into measuring and dead time, a
refusing or crashed host named even when another host rescued its shard, and tables narrow enough for
the UI's artifact page, which cuts a wide table off instead of scrolling it. Built in-process from state
histories and outcomes as the fleet flow reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from prefect.client.schemas.objects import FlowRun
from prefect.settings import PREFECT_UI_URL, temporary_settings
from prefect.states import Completed, Crashed, Failed, Pending, Running, Scheduled
from specs import VECTOR_ADD, sim_spec
from ui_width import UI_WIDTH, markdown_tables, table_width

from kernelsweep.fleet import HostReport, Shard, ShardData
from kernelsweep.fleet.cost import COMPILE
from kernelsweep.fleet.hosts import VERSION_NAMES
from kernelsweep.flows.fleet.summary import Attempt, ShardOutcome, cost_of, held_seconds, summary_markdown
from kernelsweep.sweepspec import expand

NIGHT = datetime(2026, 11, 27, 2, tzinfo=UTC)
REFUSAL = "host trn1-x is trn1 (instance type trn1.sim) but sits in work pool kernelsweep-trn2: it ran none"
COMPILE_REFUSAL = "compile host compile-2 has compiler 2.22.0.0+kernelsweep.sim (the trn2 hosts run 2.21...)"


def _at(*timed):
    """States at the given seconds after NIGHT."""
    return [state.model_copy(update={"timestamp": NIGHT + timedelta(seconds=t)}) for t, state in timed]


def _run(tags: list[str], points: int = 0) -> FlowRun:
    return FlowRun(flow_id=uuid4(), tags=tags, parameters={"points": [{}] * points})


def test_a_crashed_attempt_is_dead_time_from_its_start_to_its_crash_and_the_rest_is_measuring():
    killed = _at((0, Scheduled()), (5, Pending()), (10, Running()), (610, Crashed(message="no heartbeat for 60 s")),
                 (611, Scheduled()), (640, Running()), (670, Completed()))  # fmt: skip
    refused_then_ran = _at((0, Running()), (3, Failed(message=REFUSAL)), (4, Scheduled()), (20, Running()),
                           (80, Completed()))  # fmt: skip
    assert held_seconds(killed) == (30.0, 600.0)
    assert held_seconds(list(reversed(refused_then_ran))) == (63.0, 0.0)  # in time order, whatever the list's
    assert held_seconds(_at((0, Running()))) == (0.0, 0.0)  # still running: nothing to count yet

    cost = cost_of([
        (_run(["fleet", "trn2"], points=5), killed),
        (_run(["fleet", "trn1"], points=4), refused_then_ran),
        (_run(["fleet", COMPILE, "trn2"], points=5), _at((0, Running()), (7200, Crashed()))),
        (_run(["fleet"]), _at((0, Running()), (9000, Completed()))),  # no pool: not a shard
    ])  # fmt: skip
    assert cost is not None and cost.points == 9
    assert cost.neuron_hours * 3600 == 693 and cost.neuron_dead_hours * 3600 == 600
    assert cost.cpu_hours == 2.0  # the compile farm's crashed hours are CPU hours, not Neuron ones
    table = "\n".join(cost.lines({}))
    assert "| Neuron-host-hours | 0.193 |" in table
    assert "| of which measuring | 0.026 |" in table
    assert "| of which dead (crashed attempts) | 0.167 |" in table


def _outcomes(tmp_path):
    spec = sim_spec(tmp_path, [{**VECTOR_ADD, "grid": {"n": [2048, 4096, 8192]}}], name="night",
                    platforms=("trn1", "trn2"))  # fmt: skip
    points = expand(spec)
    trn1, trn2 = [p for p in points if p.platform == "trn1"], [p for p in points if p.platform == "trn2"]
    versions = {name: "2.21.33363.0+kernelsweep.sim" for name in VERSION_NAMES}
    objects = [f"results/date=2026-11-27/platform=trn2/{uuid4()}-{uuid4()}.parquet"]
    outcomes = [
        ShardOutcome(
            Shard(0, "trn2", trn2), str(uuid4()), "COMPLETED", "", ShardData(3, 0, objects),
            HostReport("trn2-b", "trn2", versions, "sim"),
            attempts=(Attempt("trn1-x", f"failed: {REFUSAL}"), Attempt("trn2-a", "crashed: no heartbeat for 60 s"),
                      Attempt("trn2-b", "completed")),
            compile_attempts=(Attempt("compile-2", f"failed: {COMPILE_REFUSAL}"), Attempt("compile-1", "completed")),
        ),
        ShardOutcome(
            Shard(1, "trn1", trn1), str(uuid4()), "FAILED", "wrote 0 of 3 rows; its log says why", ShardData(),
            HostReport("trn1-a", "trn1", versions, "sim"), attempts=(Attempt("trn1-a", "completed"),),
        ),
    ]  # fmt: skip
    return spec, outcomes


def test_the_summary_names_each_host_that_refused_or_crashed_even_when_another_completed_the_shard(tmp_path):
    spec, outcomes = _outcomes(tmp_path)
    text = summary_markdown(spec, outcomes, [])
    assert "1 of 2 shards completed" in text
    row = next(line for line in text.splitlines() if line.startswith("| trn2 | 0 |"))
    assert "| trn1-x (failed)<br>trn2-a (crashed)<br>trn2-b |" in row  # one a line: a cell never wraps
    listed = text.split("Attempts that did not complete")[1].split("Shards that did not complete")[0]
    assert f"- shard 0 (trn2): trn1-x (failed: {REFUSAL})" in listed  # the misplaced host, with its refusal
    assert "- shard 0 (trn2): trn2-a (crashed: no heartbeat for 60 s)" in listed
    assert f"- shard 0 (trn2), compile: compile-2 (failed: {COMPILE_REFUSAL})" in listed  # the refusing compile host
    assert "compile-1" not in text and "trn1-a (" not in listed  # what completed is not an incident
    assert "- shard 1 (trn1) failed: wrote 0 of 3 rows; its log says why" in text
    assert text.count(".parquet") == 1 and "- shard 1: none" in text
    assert "- trn2-b (trn2): compiler 2.21.33363.0+kernelsweep.sim, runtime" in text


def test_every_table_of_the_summary_fits_the_uis_artifact_pane(tmp_path):
    spec, outcomes = _outcomes(tmp_path)
    cost = cost_of([(_run(["fleet", "trn2"], points=3), _at((0, Running()), (600, Crashed()), (700, Running()),
                                                           (760, Completed())))])  # fmt: skip
    with temporary_settings({PREFECT_UI_URL: "http://127.0.0.1:4200"}):  # shard links as the UI shows them
        text = summary_markdown(spec, outcomes, ["trn2 hosts differ: compiler 2.21 (trn2-a), 2.22 (trn2-b)"], cost)
    tables = markdown_tables(text)
    assert len(tables) == 2  # shards, cost; the hosts' SDKs are a list
    for table in tables:
        assert table_width(table) <= UI_WIDTH, table
