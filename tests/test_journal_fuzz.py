"""Fuzzing what a journal may hold: no header, entry or stray file makes the next run crash (slow stage).

Hypothesis writes journals of malformed headers and entries (arbitrary JSON, the real documents with
one field replaced by any JSON value, arbitrary bytes, stray files) and the test plans and begins
the next run of the spec exactly as `kernelsweep run` does. Whatever happens must be what the CLI's
error boundary turns into exit 0 to 3 (a plan, a UsageError, a StoreError), never the "internal
error" of exit 4, and every message and warning must be one line.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, date, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specs import VECTOR_ADD, sim_spec

from kernelsweep.errors import KernelsweepError
from kernelsweep.results import journal
from kernelsweep.results.journal import entry_name, plan_resume, run_key
from kernelsweep.results.rows import Row, row_id
from kernelsweep.sweepspec.expansion import expand

pytestmark = pytest.mark.slow

NOW = datetime(2026, 11, 26, tzinfo=UTC)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _mutated(doc: dict, data: st.DataObject) -> bytes:
    """The real document with fields replaced, removed or added, or something else altogether."""
    choice = data.draw(st.sampled_from(["field", "drop", "add", "json", "bytes"]))
    if choice == "json":
        return json.dumps(data.draw(JSON)).encode()
    if choice == "bytes":
        return data.draw(st.binary(max_size=64))
    doc = json.loads(json.dumps(doc))
    target = doc["row"] if "row" in doc and data.draw(st.booleans()) else doc
    name = data.draw(st.sampled_from(sorted(target)))
    if choice == "field":
        target[name] = data.draw(JSON)
    elif choice == "drop":
        del target[name]
    else:
        target[data.draw(st.text(max_size=8))] = data.draw(JSON)
    return json.dumps(doc).encode()


def _journaled(results: str, key: str, points: list) -> journal.Journal:
    run = journal.begin(results, plan_resume(results, key, points), str(uuid.uuid4()), date(2026, 11, 26), "fuzz", NOW)
    for p in points:
        run.record(p, Row(row_id=row_id(run.run_id, p), sweep=p.sweep, kernel=p.kernel, kernel_ref=p.kernel_ref,
                          shape=p.shape, params=dict(p.params), dtype=p.dtype, platform=p.platform, lnc=p.lnc,
                          seed=p.seed, toolchain="sim", is_simulation=True, status="ok",
                          metrics={"total_time_us": 1.5}, flow_run_id=run.run_id, started_at=NOW))  # fmt: skip
    run.release()
    return run


def _exit_code(action) -> tuple[int, str]:
    """What the CLI's boundary (flows/cli/app.py) would make of it."""
    from kernelsweep.errors import UsageError

    try:
        action()
    except UsageError as exc:
        return 2, exc.message
    except KernelsweepError as exc:
        return 3, exc.message
    return 0, ""


# The code under test draws from `random` (jittered retry backoff) between the test's draws.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_journal_content_makes_the_next_run_crash(tmp_path_factory, caplog, data):
    folder = tmp_path_factory.mktemp("fuzz")
    spec = sim_spec(folder, [{**VECTOR_ADD, "grid": {"n": [2048], "free_size": [1, 2]}}], name="fuzz")
    points, key, results = expand(spec), run_key(spec), spec.results
    run = _journaled(results, key, points)
    header = json.loads(run.files.get(f"{run.base}/run.json") or b"")
    if data.draw(st.booleans()):
        run.files.put(f"{run.base}/run.json", _mutated(header, data))
    for point in points:
        if data.draw(st.booleans()):
            entry = json.loads(run.files.get(f"{run.base}/points/{entry_name(point)}") or b"")
            run.files.put(f"{run.base}/points/{entry_name(point)}", _mutated(entry, data))
    stray = data.draw(st.sampled_from(["", f"{key}/loose.json", f"{key}/{uuid.uuid4()}/points/x.json"]))
    if stray:
        run.files.put(stray, data.draw(st.binary(max_size=32)))
    caplog.clear()
    plans: list = []

    def next_run() -> None:
        with caplog.at_level(logging.WARNING, logger="kernelsweep"):
            plan = plan_resume(results, key, points, find=True, remeasure=data.draw(st.booleans()))
            plans.append(plan)
            started = journal.begin(results, plan, str(uuid.uuid4()), date(2026, 11, 27), "fuzz", NOW)
            started.release()

    try:
        code, message = _exit_code(next_run)
    finally:
        for plan in plans:
            if plan.lease:
                journal.lease.release(plan.lease)
        journal.lease.release(journal.lease.open_lease(results, key)[0])
    assert code in (0, 2), message
    assert "\n" not in message
    if code == 2:
        assert "--remeasure" in message
    for record in caplog.records:
        assert "\n" not in record.getMessage()
    if code == 0 and plans[0].resumed is not None:
        assert set(plans[0].reused) <= {p.point_id for p in points}
