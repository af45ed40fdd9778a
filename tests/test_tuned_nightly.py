"""The nightly fleet run re-checks the tuned store behind `recheck_tuned`, and the report says what the
store replaced and why (issue 36, item 5). The fleet flow's own step is `nightly_recheck` with a runner
that starts `sweep/<platform>` deployment runs; here the runner is the sweep flow in-process."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import numpy as np
import pytest
from click.testing import CliRunner
from report_rows import row
from specs import VECTOR_ADD, sim_spec

from kernelsweep.report.best import best_configurations
from kernelsweep.report.load import load
from kernelsweep.report.stats import Rule
from kernelsweep.report.summary import build_report
from kernelsweep.tuned.nightly import recheck_spec
from kernelsweep.tuned.recheck import _carried
from kernelsweep.tuned.record import entry_key, record
from kernelsweep.tuned.store import TunedStore

pytestmark = pytest.mark.usefixtures("prefect_harness")

# one small shape, two configurations far apart (28 and 39 us modelled): a search's best and runner-up
MATMUL = {
    "kernel": "matmul",
    "dtypes": ["bfloat16"],
    "grid": {"M": [128], "K": [128], "N": [512]},
    "tunables": {"tile_m": [128], "tile_n": [512], "tile_k": [128], "loop_order": ["nm"]},
}
SLOWER = {**MATMUL, "tunables": {"tile_m": [32], "tile_n": [64], "tile_k": [32], "loop_order": ["nm"]}}


def _nightly(spec, runner):
    from prefect import flow

    from kernelsweep.flows.fleet.recheck import nightly_recheck

    @flow(name="nightly-recheck-test")
    def night():
        return nightly_recheck(spec, runner)

    return night()


def test_the_nightly_recheck_is_off_without_its_setting_and_while_the_store_holds_no_best(tmp_path):
    asked = []
    off = sim_spec(tmp_path, [MATMUL])
    assert _nightly(off, asked.append) is None
    empty = sim_spec(tmp_path, [MATMUL], recheck_tuned={"effort": "quick"})
    assert _nightly(empty, asked.append) is None and asked == []  # no host was asked for anything
    # a stored best of another kernel is nothing this spec re-checks either
    assert recheck_spec(empty, [{"key": {"kernel": "mlp", "platform": "trn2"}}]) is None


def test_the_recheck_spec_searches_the_blocks_with_tunables_and_a_stored_best(tmp_path):
    spec = sim_spec(tmp_path, [VECTOR_ADD, MATMUL], recheck_tuned={"effort": "quick"})
    checked = recheck_spec(spec, [{"key": {"kernel": "matmul", "platform": "trn2"}}])
    assert checked is not None and [b.kernel for b in checked.kernels] == ["matmul"]
    search = checked.kernels[0].search
    assert search is not None and (search.effort, search.budget, search.repeats) == ("quick", 8, 5)
    assert checked.recheck_tuned is None and checked.results == spec.results


def test_a_nightly_with_the_setting_contests_each_stored_best_against_its_runner_up(tmp_path):
    from kernelsweep.flows.sweep import sweep

    spec = sim_spec(tmp_path, [MATMUL, SLOWER], name="nightly", capture={"num_exec": 2, "repeats": 3})
    sweep(spec)
    first = best_configurations(load(spec.results), Rule())
    record(TunedStore(spec.results_location), first, by="report")
    (stored,) = TunedStore(spec.results_location).entries()
    assert stored["best"]["tunables"]["tile_m"] == 128 and stored["runner_up"] is not None

    ran = []

    def runner(s):
        ran.append(s)
        return sweep(s)

    assert _nightly(spec, runner) is None and ran == []  # the same spec without the setting: off
    nightly = sim_spec(
        tmp_path, [MATMUL], name="nightly", capture={"num_exec": 2, "repeats": 3}, recheck_tuned={"budget": 2}
    )
    outcome = _nightly(nightly, runner)
    assert outcome is not None and len(outcome.held) == 1 and outcome.retuned == []  # 39 us never beats 28
    assert [s.name for s in ran] == ["nightly-contest"] * 3 and all(s.platforms == ["trn2"] for s in ran)
    (entry,) = TunedStore(spec.results_location).entries()
    assert entry["confirmed"]["by"] == "recheck" and entry["best"]["tunables"] == stored["best"]["tunables"]
    assert outcome.summary() == "re-checked 1 stored best(s): 1 held, 0 re-tuned"


AT = "2026-11-02T03:00:00+00:00"


def _config(tunables: str, centre: float, compiler: str, run: str):
    rng = np.random.default_rng(len(run) + int(centre))
    made = row(
        kernel="matmul",
        shape="M=512,K=1024,N=2048",
        latencies=list(centre * (1 + 0.003 * rng.standard_normal(10))),
        run=run,
        compiler=compiler,
    )
    return replace(made, row_id=f"{made.row_id}/{tunables}", tunables=tunables, lnc=2, search_trial=0)


def test_the_report_lists_each_replaced_best_was_and_now_with_the_verdict(tmp_path):
    """An SDK bump's re-tune as the store keeps it: 2.21's best carried to 2.22, then beaten clearly."""
    from kernelsweep.flows.cli.app import cli
    from kernelsweep.flows.sweep import sweep

    spec = sim_spec(tmp_path, [VECTOR_ADD], name="report-tuned")
    sweep(spec)  # a dataset for the report to read
    store = TunedStore(spec.results_location)
    old = _config("loop_order=nm", 60.0, "2.21", "run-0"), _config("loop_order=mn", 69.0, "2.21", "run-0")
    record(store, best_configurations(list(old), Rule()), by="search")
    (before,) = store.entries()
    new = _config("loop_order=mn", 48.0, "2.22", "run-1"), _config("loop_order=nm", 60.0, "2.22", "run-1")
    bests = best_configurations(list(new), Rule())
    store.put(_carried(before, entry_key(bests[0].best)))
    record(store, bests, by="search", at=datetime.fromisoformat(AT))

    built = build_report(spec.results)
    (change,) = built.tuned_rows()
    assert (change["shape"], change["sdk"], change["was"], change["now"]) == (
        "M=512,K=1024,N=2048", "2.22", "loop_order=nm (from 2.21)", "loop_order=mn",
    )  # fmt: skip
    assert (change["at"], change["verdict"]) == ("2026-11-02 03:00 UTC", "clear win")
    assert "lies above" in str(change["why"])  # the runner-up's gap, by the verdict rule

    result = CliRunner().invoke(cli, ["report", "--results", spec.results])
    shown = result.output  # the table wraps its cells, so each is looked for in its first line's part
    assert "Tuned store: bests replaced" in shown and "loop_order=nm (from" in shown and "lies above +2%" in shown
