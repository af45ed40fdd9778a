"""A search shared by several processes, as a fleet run's search shards share one study (issue 36): the
study log's appends never overwrite one another, a resumed shard asks again only its own dead
attempt's trials, and the fleet plans K search shards per family. No server: the study and the plan
are core code; the fleet end to end is tests/test_fleet.py."""

from __future__ import annotations

import json
import threading

import optuna
import pytest
from optuna.trial import TrialState
from specs import sim_spec
from test_sweep_choices import _row  # a trial's row, as a search is told it

from kernelsweep.fleet.plan import plan_search_shards, plan_shards
from kernelsweep.results.journal_files import open_files
from kernelsweep.search.storage import FilesBackend, study_storage
from kernelsweep.search.study import OWNER, ShapeSearch
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.load import parse_spec

MATMUL = {"kernel": "matmul", "grid": {"M": [512], "K": [256], "N": [1024]}, "search": {"budget": 8}}


def _target() -> SearchTarget:
    spec = parse_spec({"name": "t", "platforms": ["trn2"], "kernels": [MATMUL], "toolchain": "sim"})
    return expand_spec(spec).targets[0]


class _Racing:
    """The study log's files, where another process appends its own object the first time this one
    lists them: between this process's read of the log and its write of the next object."""

    def __init__(self, root, other: FilesBackend, logs: list[dict]) -> None:
        self.inner, self.other, self.logs = open_files(root), other, logs

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def list(self, prefix: str) -> list[str]:
        names = self.inner.list(prefix)
        if self.logs:
            self.other.append_logs(self.logs)
            self.logs = []
        return names


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_a_put_new_never_replaces_an_object(tmp_path, where, request):
    root = str(tmp_path / "results") if where == "folder" else f"s3://{request.getfixturevalue('bucket')}/results"
    files = open_files(root)
    assert files.put_new("search/log-0.json", b"first") is True
    assert files.put_new("search/log-0.json", b"second") is False
    assert files.get("search/log-0.json") == b"first" and files.list("search/") == ["search/log-0.json"]


def test_two_processes_appending_at_once_both_land_in_one_order(tmp_path):
    root = str(tmp_path / "results")
    create = [{"op_code": 0, "worker_id": "b", "study_name": "s", "directions": [1]}]
    other = FilesBackend(open_files(root), "search/k/run")
    mine = FilesBackend(_Racing(root, other, create), "search/k/run")
    mine.append_logs([{"op_code": 0, "worker_id": "a", "study_name": "t", "directions": [1]}])
    names = open_files(root).list("search/k/run/")
    assert [json.loads(open_files(root).get(n))[0]["worker_id"] for n in names] == ["b", "a"]  # none overwritten
    fresh = FilesBackend(open_files(root), "search/k/run")
    assert [e["study_name"] for e in fresh.read_logs(0)] == ["s", "t"]


def test_shards_sharing_a_study_never_ask_one_configuration_twice_and_a_retry_asks_only_its_own(tmp_path):
    target = _target()

    def shard(owner: str) -> ShapeSearch:
        storage, _ = study_storage(str(tmp_path / "results"), "key", "fleet-1")
        return ShapeSearch.open(target, storage, lambda p: None, owner)

    first, second = shard("shard-0"), shard("shard-1")
    dying = first.propose(3)
    live = second.propose(3)
    configs = [p.tunables_text for p in dying + live]
    assert len(set(configs)) == 6  # the second shard asks nothing the first is measuring
    live += second.propose(8)
    assert len(live) == 5  # the first shard's running three count toward the budget of 8
    rows = {p.point_id: _row(p, 100.0 + i) for i, p in enumerate(dying[:1])}  # journaled before it died

    retried = shard("shard-0")  # the dead shard's retry, on another host: its journal holds one row
    kept = retried.resume(lambda points: {p.point_id: rows[p.point_id] for p in points if p.point_id in rows})
    assert [r.tunables for r in kept] == [dying[0].tunables_text]
    trials = retried.study.get_trials(deepcopy=False)
    interrupted = [t for t in trials if t.user_attrs.get("kernelsweep_reason") == "interrupted"]
    assert {t.user_attrs[OWNER] for t in interrupted} == {"shard-0"} and len(interrupted) == 2
    still = [t for t in trials if t.state == TrialState.RUNNING]
    assert {t.user_attrs[OWNER] for t in still} == {"shard-1"} and len(still) == 5  # the live shard's, untouched
    again = retried.propose(2)
    assert sorted(p.tunables_text for p in again) == sorted(p.tunables_text for p in dying[1:])
    for point in live:
        second.record(point, _row(point, 90.0))
    for point in again:
        retried.record(point, _row(point, 95.0))
    assert retried.measured == 8 and not retried.propose(8)  # the budget, each configuration measured once
    measured = [t for t in retried.study.trials if t.state == TrialState.COMPLETE and t.user_attrs.get(OWNER)]
    assert len({tuple(sorted(t.params.items())) for t in measured}) == len(measured) == 8


def test_a_shard_dying_between_a_trials_parameters_and_its_owner_leaves_no_trial_unasked(tmp_path):
    """The host dies right after the study gave a new trial its parameters (here: the next step, the check
    of the proposed point, raises). The retry must ask that configuration again, or the trial holds a
    place in the budget for ever (a fleet search once ended a trial short)."""
    target = _target()

    def died(point):
        raise SystemExit("the host died")

    def shard(owner: str, invalid=lambda p: None) -> ShapeSearch:
        storage, _ = study_storage(str(tmp_path / "results"), "key", "fleet-1")
        return ShapeSearch.open(target, storage, invalid, owner)

    with pytest.raises(SystemExit):
        shard("shard-0", invalid=died).propose(1)
    retried = shard("shard-0")
    retried.resume(lambda points: {})
    assert not retried._running()  # nothing left running with nobody to measure it
    assert len(retried.propose(8)) == 8  # the whole budget is still there


def test_of_two_shards_asking_one_configuration_at_once_only_the_first_in_the_log_measures_it(tmp_path):
    target = _target()
    storage, _ = study_storage(str(tmp_path / "results"), "key", "fleet-1")
    first = ShapeSearch.open(target, storage, lambda p: None, "shard-0")
    second = ShapeSearch.open(target, study_storage(str(tmp_path / "results"), "key", "fleet-1")[0], lambda p: None,
                              "shard-1")  # fmt: skip
    [asked] = first.propose(1)
    second._running = dict  # its read of the running trials came just before the first shard's ask
    second.study.enqueue_trial(first.study.trials[0].params)  # and its sampler picks the same configuration
    assert asked.tunables_text not in [p.tunables_text for p in second.propose(3)]


def test_a_peers_earlier_trial_still_getting_its_parameters_is_waited_for_not_measured_twice(tmp_path):
    """Two shards seeded alike propose the same first configuration. The later one read the earlier one's
    trial while its parameters were still being written (one write each), took it for no configuration,
    and both measured it: a fleet search measured 5 configurations for a budget of 6."""
    target = _target()
    first, second = (
        ShapeSearch.open(target, study_storage(str(tmp_path / "results"), "key", "fleet-1")[0], lambda p: None, owner)
        for owner in ("shard-0", "shard-1")
    )
    config = ShapeSearch.open(target, optuna.storages.InMemoryStorage(), lambda p: None).study
    [point] = ShapeSearch(target, config, lambda p: None).propose(1)
    params = config.trials[0].params
    first.study.enqueue_trial(params)
    asking = first.study.ask()  # the first shard's trial: its owner written, its parameters not yet
    asking.set_user_attr(OWNER, "shard-0")
    second.study.enqueue_trial(params)  # the second shard's sampler picks the same configuration

    def parameters() -> None:  # the rest of the first shard's ask, a moment later
        for name, distribution in first._distributions.items():
            if isinstance(distribution, optuna.distributions.IntDistribution):
                asking.suggest_int(name, distribution.low, distribution.high)
            else:
                asking.suggest_categorical(name, distribution.choices)

    writer = threading.Timer(0.5, parameters)
    writer.start()
    proposed = second.propose(3)
    writer.join()
    assert first.point(first.study.trials[0]).tunables_text == point.tunables_text  # the first's, written
    assert len(proposed) == 3 and point.tunables_text not in [p.tunables_text for p in proposed]


def test_a_peer_that_died_before_its_trials_parameters_is_waited_for_once(tmp_path, monkeypatch):
    from kernelsweep.search import study

    monkeypatch.setattr(study, "PEER_ASK_SECONDS", 0.3)
    target = _target()
    dead, live = (
        ShapeSearch.open(target, study_storage(str(tmp_path / "results"), "key", "fleet-1")[0], lambda p: None, owner)
        for owner in ("shard-0", "shard-1")
    )
    dead.study.ask().set_user_attr(OWNER, "shard-0")  # its process died here, before any parameter
    waits = []
    monkeypatch.setattr(study.time, "sleep", waits.append)  # each poll of the peer's trial, counted
    assert len(live.propose(2)) == 2 and waits  # waited for it, then measured without it
    polls = len(waits)
    assert len(live.propose(2)) == 2 and len(waits) == polls  # never waited for again


def test_a_search_spec_plans_k_search_shards_per_family_after_the_grid_shards(tmp_path):
    grid = {"kernel": "vector_add", "dtypes": ["float32"], "grid": {"n": [2048, 4096]}}
    searched = {**MATMUL, "grid": {"M": [512], "K": [256], "N": [1024, 2048]}, "search": {"budget": 6}}
    spec = sim_spec(tmp_path, [grid, searched], platforms=("trn1", "trn2"))
    expansion = expand_spec(spec)
    shards = plan_shards(expansion.points, 2)
    shards += plan_search_shards(expansion.targets, 4, len(shards))
    assert [(s.index, s.family, s.search) for s in shards] == [
        (0, "trn1", False), (1, "trn2", False),
        (2, "trn1", True), (3, "trn1", True), (4, "trn1", True),  # 2 shapes x 6 trials over 4 a shard: 3
        (5, "trn2", True), (6, "trn2", True), (7, "trn2", True),
    ]  # fmt: skip
    for shard in shards[2:]:  # every search shard runs every searched shape of its family
        assert sorted(p.shape for p in shard.points) == sorted(
            t.point.shape for t in expansion.targets if t.point.platform == shard.family
        )
        assert all(p.platform == shard.family and not p.tunables for p in shard.points)
    assert [s.search for s in plan_search_shards(expansion.targets, 100, 0)] == [True, True]  # at least one a family
