"""The fleet summary names every host that started a shard and how each earlier attempt ended (issue 35):
a dead host's attempt is not hidden behind the host of the retry that completed it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prefect.states import Completed, Crashed, Failed, Pending, Running, Scheduled

from kernelsweep.fleet.hosts import attempt_hosts, attempt_label
from kernelsweep.flows.fleet.flow import _attempts
from kernelsweep.flows.fleet.summary import Attempt


def _timed(*states):
    start = datetime(2026, 11, 27, 2, tzinfo=UTC)
    return [s.model_copy(update={"timestamp": start + timedelta(seconds=i)}) for i, s in enumerate(states)]


def test_each_attempt_is_named_with_how_it_ended_in_the_order_of_the_states_not_of_the_list():
    states = _timed(Scheduled(), Pending(), Running(), Crashed(message="its host died"), Scheduled(), Running(),
                    Failed(message="host trn1-x is trn1"), Running(), Completed(message="6 points"))  # fmt: skip
    labels = {attempt_label(3): "trn2-c", attempt_label(1): "trn2-a", attempt_label(2): "trn1-x", "other": 1}
    attempts = _attempts(attempt_hosts(labels), list(reversed(states)))
    assert attempts == (
        Attempt("trn2-a", "crashed: its host died"),
        Attempt("trn1-x", "failed: host trn1-x is trn1"),
        Attempt("trn2-c", "completed"),
    )


def test_an_attempt_still_going_is_running_and_a_missing_label_is_a_question_mark():
    assert _attempts(attempt_hosts({attempt_label(2): "b"}), _timed(Running(), Crashed(), Running())) == (
        Attempt("?", "crashed"),
        Attempt("b", "running"),
    )
