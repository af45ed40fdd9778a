"""Choosing a sweep's points (issue 24): filters with reasons, covering arrays, LNC as an axis, and a
search that resumes. All without Prefect: expansion and the search's study are core code."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest

from kernelsweep.errors import UsageError
from kernelsweep.results.rows import Row, row_id
from kernelsweep.search.storage import study_storage
from kernelsweep.search.study import ShapeSearch
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.coverage import CoverageSettings, pick, tuple_coverage
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.point import Point
from kernelsweep.sweepspec.search_settings import SearchSettings


def _spec(kernels: list[dict], platforms: tuple[str, ...] = ("trn2",), **extra: object):
    return parse_spec({"name": "t", "platforms": list(platforms), "kernels": kernels, "toolchain": "sim", **extra})


def test_pairwise_on_four_axes_of_five_values_covers_every_pair_with_far_fewer_points():
    axes = {name: [1, 2, 3, 4, 5] for name in "abcd"}
    picked = pick(CoverageSettings(strategy="pairwise"), axes, lambda _: True)
    covered, total = tuple_coverage(picked.combinations, axes, 2)
    print(f"pairwise: {len(picked.combinations)} points for a grid of {picked.grid_size}")
    assert (covered, total) == (150, 150)  # 6 axis pairs x 25 value pairs, each seen at least once
    assert len(picked.combinations) <= 40 < picked.grid_size == 625
    again = pick(CoverageSettings(strategy="pairwise"), axes, lambda _: True)
    assert again.combinations == picked.combinations  # deterministic for a seed
    three = pick(CoverageSettings(strategy="nwise", strength=3), axes, lambda _: True)
    assert tuple_coverage(three.combinations, axes, 3) == (500, 500)


def test_random_coverage_draws_distinct_combinations_from_its_seed():
    axes = {name: list(range(10)) for name in "abc"}
    drawn = pick(CoverageSettings(strategy="random", budget=25, seed=3), axes, lambda c: c["a"] != 0)
    assert len(drawn.combinations) == 25 and all(c["a"] != 0 for c in drawn.combinations)
    assert len({tuple(c.values()) for c in drawn.combinations}) == 25
    assert (
        drawn.combinations
        == pick(CoverageSettings(strategy="random", budget=25, seed=3), axes, lambda c: c["a"] != 0).combinations
    )


def test_an_impossible_combination_is_dropped_with_its_reason_and_the_valid_points_stay():
    block = {
        "kernel": "mlp",
        "dtypes": ["bfloat16"],
        "grid": {"s": [128], "h": [1024, 131072], "i": [512, 4096, 8192]},
        "where": ["i <= 4 * h"],
        "exclude": [{"h": 1024, "i": 4096}],
    }
    expansion = expand_spec(_spec([block], platforms=("trn2", "trn1")), "s.toml")
    kept = {(p.params["h"], p.params["i"], p.platform) for p in expansion.points}
    assert kept == {(1024, 512, "trn2"), (1024, 512, "trn1")}
    reasons = dict(expansion.drops.counts)
    assert reasons["mlp: excluded (h=1024, i=4096)"] == 2 and reasons["mlp: where `i <= 4 * h` is false"] == 2
    sbuf = [r for r in reasons if "of SBUF per partition" in r]  # the kernel's own rule, at h=131072
    assert sbuf and sum(reasons[r] for r in sbuf) == 6 and expansion.drops.total == 10


def test_a_condition_naming_no_axis_or_using_python_is_one_line_before_any_work():
    block = {"kernel": "matmul", "grid": {"M": [128], "K": [128], "N": [512]}}
    for condition, message in [
        ("Mx <= 4", "names 'Mx', which this block does not have"),
        ("M.__class__", "uses Attribute, which conditions do not allow"),
        ("open('x')", "calls a function other than min() or max()"),
    ]:
        with pytest.raises(UsageError, match=re.escape(message)):
            expand_spec(_spec([{**block, "where": [condition]}]))


def test_lnc_one_and_two_on_trn2_doubles_the_points_with_distinct_ids_and_trn1_keeps_its_own():
    block = {"kernel": "matmul", "grid": {"M": [256], "K": [512], "N": [512, 1024]}}
    single = expand_spec(_spec([block])).points
    both = expand_spec(_spec([{**block, "lnc": [1, 2]}], platforms=("trn2", "trn1")))
    trn2 = [p for p in both.points if p.platform == "trn2"]
    assert len(trn2) == 2 * len(single) and {p.lnc for p in trn2} == {1, 2}
    assert len({row_id("run", p) for p in both.points}) == len(both.points)
    assert {p.point_id for p in single} <= {p.point_id for p in trn2}  # the default LNC keeps its old id
    assert [p.lnc for p in both.points if p.platform == "trn1"] == [1, 1]
    assert dict(both.drops.counts) == {"matmul: trn1 runs at LNC 1, not 2": 2}


class _Killed(Exception):
    pass


def _row(point: Point, latency: float) -> Row:
    return Row(
        row_id=row_id("run", point), sweep="t", kernel=point.kernel, kernel_ref=point.kernel_ref, shape=point.shape,
        params=point.params, dtype=point.dtype, platform=point.platform, lnc=point.lnc, seed=0, toolchain="sim",
        is_simulation=True, status="ok", flow_run_id="run", latency_median_us=latency, correct=True,
        tunables=point.tunables_text,
    )  # fmt: skip


def _latency(point: Point) -> float:
    """A stand-in objective with one best configuration (the test is about bookkeeping, not the model)."""
    t = point.tunables
    return 100.0 + (128 - int(t["tile_m"])) + (512 - int(t["tile_n"])) / 4 + (t["loop_order"] == "mn") * 7


def test_a_killed_search_resumes_its_study_and_measures_what_it_left_running(tmp_path):
    spec = _spec([{"kernel": "matmul", "grid": {"M": [512], "K": [256], "N": [1024]}, "search": {"budget": 10}}])
    target = next(iter(expand_spec(spec).targets))
    assert isinstance(target, SearchTarget) and target.settings == SearchSettings(budget=10)
    journal: dict[str, Row] = {}

    def run(kill_after: int | None) -> ShapeSearch:
        storage, _ = study_storage(str(tmp_path / "results"), "key", "run-1")
        search = ShapeSearch.open(target, storage, lambda p: None)
        search.resume(lambda points: {p.point_id: journal[p.point_id] for p in points if p.point_id in journal})
        done = 0
        while batch := search.propose(3):
            for point in batch:
                if kill_after is not None and done == kill_after:
                    raise _Killed  # the rest of the batch stays RUNNING in the stored study
                journal[point.point_id] = _row(point, _latency(point))  # journaled first, as the flow does
                search.record(point, journal[point.point_id])
                done += 1
        return search

    with pytest.raises(_Killed):
        run(kill_after=4)
    stored = optuna.load_study(
        study_name=target.point.point_id, storage=study_storage(str(tmp_path / "results"), "key", "run-1")[0]
    )
    left = [t for t in stored.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert len(left) == 2 and sum(t.state == optuna.trial.TrialState.COMPLETE for t in stored.trials) == 4
    resumed = run(kill_after=None)
    assert resumed.measured == 10  # the budget: the two interrupted trials are marked, not counted
    reasons = [t.user_attrs.get("kernelsweep_reason") for t in resumed.study.trials]
    assert reasons.count("interrupted") == 2
    asked_again = {tuple(sorted(t.params.items())) for t in left}
    measured = {
        tuple(sorted(t.params.items())) for t in resumed.study.trials if t.state == optuna.trial.TrialState.COMPLETE
    }
    assert asked_again <= measured
    assert len(journal) == sum(
        1
        for t in resumed.study.trials
        if t.state == optuna.trial.TrialState.COMPLETE and "kernelsweep_reason" not in t.user_attrs
    )


FILTERED = """name = "matmul-pairwise"
platforms = ["trn2", "trn1"]
toolchain = "sim"

[[kernels]]
kernel = "matmul"
dtypes = ["bfloat16"]
lnc = [1, 2]
coverage = "pairwise"
grid = { M = [128, 256, 512, 1024, 2048], K = [128, 256, 512, 1024, 2048], N = [256, 512, 1024, 2048, 4096] }
tunables = { tile_n = [64, 128, 256, 512] }
where = ["M * N <= 4 * 2**20", "tile_n <= N"]
exclude = [{ platform = "trn1", K = 2048 }]
"""


def test_validate_prints_the_dropped_points_by_reason_as_the_docs_show_them(tmp_path, monkeypatch, capsys):
    """docs/sweeps.md's and the README's `validate` excerpt of this spec is what the command prints."""
    from kernelsweep.flows.cli import app

    (tmp_path / "filtered.toml").write_text(FILTERED)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        app.main(["validate", "filtered.toml"])
    out, err = capsys.readouterr()
    assert exited.value.code == 0, err
    assert "filtered.toml: 37 point(s) dropped" in err
    summary = out[out.index("kernels[0] matmul: pairwise") :].rstrip("\n").splitlines()
    assert summary[1:3] == ["  83 point(s), 37 dropped", "dropped 37 point(s), by reason:"]
    assert [line.split()[0] for line in summary[3::2]] == ["30", "7"]  # the count of each reason, most first
    docs = (Path(__file__).resolve().parents[1] / "docs" / "sweeps.md").read_text()
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for line in summary:
        assert line in docs and line in readme, line
