"""The tuned store fed by a real simulated search and read back through the commands (issue 36): a
search records its winner with its lineage, `report --export-best` confirms it, `kernelsweep tuned
export` writes the file `kernelsweep.tuned.best` reads."""

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
    (entry,) = TunedStore(results).entries()
    winner = rows[entry["best"]["row_id"]]  # lineage: the trial row it came from
    measured = [r for r in rows.values() if r["status"] == "ok"]
    assert winner["latency_median_us"] == min(r["latency_median_us"] for r in measured)
    assert entry["runner_up"]["row_id"] in rows and entry["confirmed"]["by"] == "search"
    assert entry["key"]["sdk"]["compiler"] == winner["compiler_version"] and entry["simulated"] is True

    runner = CliRunner()
    done = runner.invoke(cli, ["report", "--results", results, "--export-best", str(tmp_path / "best.toml")])
    assert done.exit_code == 0, done.output
    assert "0 of 1 key(s) new or replaced" in done.output
    assert TunedStore(results).entries()[0]["confirmed"]["by"] == "report"

    done = runner.invoke(cli, ["tuned", "export", "--results", results, str(tmp_path / "tuned.json")])
    assert done.exit_code == 0, done.output
    found = best("matmul", "M=512,K=256,N=1024", dtype="bfloat16", platform="trn2", source=tmp_path / "tuned.json")
    assert found.match == EXACT and found.tunables == entry["best"]["tunables"]
    assert json.loads((tmp_path / "tuned.json").read_text())["defaults"]["matmul"]["tile_m"] == 128
    shown = runner.invoke(cli, ["tuned", "show", "--results", results])
    assert shown.exit_code == 0 and "matmul M=512,K=256,N=1024 bfloat16 trn2" in shown.output


def test_exporting_an_empty_store_is_one_line_and_exit_2(tmp_path):
    from kernelsweep.flows.cli.app import main

    with pytest.raises(SystemExit) as ended:
        main(["tuned", "export", "--results", str(tmp_path / "results"), str(tmp_path / "tuned.json")])
    assert ended.value.code == 2 and not (tmp_path / "tuned.json").exists()
