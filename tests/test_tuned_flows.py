"""The tuned store fed by a real simulated search and read back through the commands (issue 36): a
search's winner is measured again against its runner-up (a contest of three runs) before it enters
with its lineage, `report --export-best` records the report's best, `kernelsweep tuned export` writes
the file `kernelsweep.tuned.best` reads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from specs import sim_spec

from kernelsweep.results import reader
from kernelsweep.tuned import EXACT, best
from kernelsweep.tuned.store import TunedStore

pytestmark = pytest.mark.usefixtures("prefect_harness")

SEARCH = {
    "kernel": "matmul",
    "dtypes": ["bfloat16"],
    "grid": {"M": [512], "K": [256], "N": [1024]},
    "search": {"budget": 4, "seed": 1},
}


def test_a_search_records_its_winner_and_the_report_and_export_read_it(tmp_path):
    from kernelsweep.flows.cli.app import cli
    from kernelsweep.flows.sweep import sweep

    sweep(sim_spec(tmp_path, [SEARCH], name="tuned"))
    results = str(tmp_path / "results")
    rows = {r["row_id"]: r for r in reader.read(results).to_pylist()}
    trials = [r for r in rows.values() if r["sweep"] == "tuned" and r["status"] == "ok"]
    top_two = [r["tunables"] for r in sorted(trials, key=lambda r: r["latency_median_us"])[:2]]
    contest = [r for r in rows.values() if r["sweep"] == "tuned-contest"]
    # confirmed before it entered: the search's best two measured again, together, in 3 runs of their own
    assert len({r["flow_run_id"] for r in contest}) == 3 and sorted(r["tunables"] for r in contest) == sorted(
        top_two * 3
    )
    (entry,) = TunedStore(results).entries()
    winner = rows[entry["best"]["row_id"]]  # lineage: the row it came from
    assert winner["sweep"] == "tuned-contest" and winner["tunables"] in top_two
    assert rows[entry["runner_up"]["row_id"]]["tunables"] in top_two and entry["confirmed"]["by"] == "search"
    assert entry["gap"]["verdict"] in ("clear win", "tie", "inconclusive")
    assert entry["key"]["sdk"]["compiler"] == winner["compiler_version"] and entry["simulated"] is True

    runner = CliRunner()
    done = runner.invoke(cli, ["report", "--results", results, "--export-best", str(tmp_path / "best.toml")])
    assert done.exit_code == 0, done.output
    assert "of 1 key(s) new or replaced" in done.output and len(TunedStore(results).entries()) == 1

    done = runner.invoke(cli, ["tuned", "export", "--results", results, str(tmp_path / "tuned.json")])
    assert done.exit_code == 0, done.output
    found = best("matmul", "M=512,K=256,N=1024", dtype="bfloat16", platform="trn2", source=tmp_path / "tuned.json")
    assert found.match == EXACT and found.tunables == TunedStore(results).entries()[0]["best"]["tunables"]
    assert json.loads((tmp_path / "tuned.json").read_text())["defaults"]["matmul"]["tile_m"] == 128
    shown = runner.invoke(cli, ["tuned", "show", "--results", results])
    assert shown.exit_code == 0 and "matmul M=512,K=256,N=1024 bfloat16 trn2" in shown.output


def test_exporting_an_empty_store_is_one_line_and_exit_2(tmp_path):
    from kernelsweep.flows.cli.app import main

    with pytest.raises(SystemExit) as ended:
        main(["tuned", "export", "--results", str(tmp_path / "results"), str(tmp_path / "tuned.json")])
    assert ended.value.code == 2 and not (tmp_path / "tuned.json").exists()


SHAPE = {"M": [512], "K": [1024], "N": [2048]}  # modelled: tile_n=512 ~16% faster than 256 in loop order nm


def _block(tile_n: list[int], search: dict | None = None) -> dict:
    block = {"kernel": "matmul", "dtypes": ["bfloat16"], "grid": SHAPE}
    block["tunables"] = {"tile_m": [128], "tile_k": [128], "tile_n": tile_n, "loop_order": ["nm"]}
    return block | ({"search": search} if search else {})


@pytest.mark.slow
def test_a_challenger_replaces_the_stored_best_only_by_winning_its_contest(tmp_path):
    from kernelsweep.flows.cli.app import cli
    from kernelsweep.flows.sweep import sweep

    results = str(tmp_path / "results")
    sweep(sim_spec(tmp_path, [_block([256])], name="grid"))  # the incumbent: the slower tile
    done = CliRunner().invoke(cli, ["report", "--results", results, "--export-best", str(tmp_path / "b.json")])
    assert done.exit_code == 0 and "1 of 1 key(s) new or replaced" in done.output, done.output
    store = TunedStore(results)

    sweep(sim_spec(tmp_path, [_block([256, 512], {"budget": 2, "seed": 1})], name="better"))
    (entry,) = store.entries()
    assert entry["best"]["tunables"]["tile_n"] == 512 and entry["history"][0]["tunables"]["tile_n"] == 256
    assert entry["gap"]["verdict"] == "clear win" and entry["gap"]["ratio"] > 1.05

    # a search that only tries the slower tile: its winner meets the stored best and loses
    sweep(sim_spec(tmp_path, [_block([256], {"budget": 1, "seed": 1})], name="worse"))
    (kept,) = store.entries()
    assert kept["best"]["tunables"]["tile_n"] == 512 and kept["best"]["flow_run_id"] != entry["best"]["flow_run_id"]
    assert len(kept["history"]) == 1  # confirmed again, not replaced
