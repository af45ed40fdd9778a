"""Reading a search back (issue 24): variants are their own series, the best configuration per shape
with the runner-up's gap judged by the verdict rule, the exported file, the kernel x toolchain x LNC
matrix, a version comparison from one run that swept two toolchains, and the fleet refusing a
search. Rows are made directly (tests/report_rows.py), so every test here takes milliseconds."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace

import numpy as np
import pytest
from report_rows import row

from kernelsweep.errors import UsageError
from kernelsweep.report.best import best_configurations, export, progress
from kernelsweep.report.compare import compare_versions
from kernelsweep.report.load import latest
from kernelsweep.report.matrix import matrix_rows
from kernelsweep.report.plots_search import best_so_far
from kernelsweep.report.stats import Rule

SHAPE = "M=512,K=1024,N=2048"
RNG = np.random.default_rng(24)


def _config(tunables: str, centre: float, *, trial: int | None = None, status: str = "ok", **fields) -> object:
    values = list(centre * (1 + 0.003 * RNG.standard_normal(10)))
    made = row(kernel="matmul", shape=SHAPE, latencies=values, status=status, run=fields.pop("run", "run-0"))
    fields.setdefault("lnc", 2)  # trn2's default: no LNC in the variant
    return replace(made, row_id=f"{made.row_id}/{tunables}", tunables=tunables, search_trial=trial, **fields)


def test_lnc_tunables_and_toolchains_are_separate_series():
    rows = [
        _config("tile_m=128", 100.0, lnc=2),
        _config("tile_m=128", 300.0, lnc=1),
        _config("tile_m=64", 150.0, lnc=2),
        _config("tile_m=128", 110.0, lnc=2, toolchain_name="2.22"),
    ]
    newest = latest(rows)
    assert len(newest) == 4  # one series each: nothing overwrote anything
    assert {r.variant for r in newest} == {"tile_m=128", "lnc=1 tile_m=128", "tile_m=64", "tile_m=128 toolchain=2.22"}


def test_the_best_configuration_wins_clearly_ties_are_said_and_failures_never_win():
    rows = [
        _config("tile_m=128,loop_order=mn", 100.0, trial=0),
        _config("tile_m=64,loop_order=mn", 110.0, trial=1),
        _config("tile_m=32,loop_order=mn", 20.0, trial=2, status="failed"),  # fast but failed
        _config("tile_m=128,loop_order=nm", 300.0, trial=3),
    ]
    other = [replace(r, shape="M=2048,K=1024,N=2048", row_id=r.row_id + "/big") for r in rows[:2]]
    other[1] = replace(other[1], latencies_us=list(other[0].latencies_us or []), latency_median_us=100.0)
    best = {b.key[1]: b for b in best_configurations(rows + other, Rule())}
    clear = best[SHAPE]
    assert clear.best.tunables == "tile_m=128,loop_order=mn" and (clear.tried, clear.failed) == (4, 1)
    assert clear.runner_up is not None and clear.runner_up.tunables == "tile_m=64,loop_order=mn"
    assert clear.verdict == "clear win" and clear.gap is not None and 1.08 < clear.gap.ratio < 1.12
    assert best["M=2048,K=1024,N=2048"].verdict == "tie"  # the same repeats: the gap lies within +-2%
    assert [n for n, _ in progress(rows)["matmul"][f"{SHAPE} float32 trn2"]] == [1, 2, 3, 4]


def test_best_so_far_only_falls_and_starts_at_the_first_measured_trial():
    assert best_so_far([(1, None), (2, 5.0), (3, 7.0), (4, 4.0), (5, None)]) == [(2, 5.0), (3, 5.0), (4, 4.0), (5, 4.0)]


def test_export_best_writes_a_toml_a_kernel_author_can_commit(tmp_path):
    rows = [_config("tile_m=128,loop_order=mn", 100.0, trial=0), _config("tile_m=64,loop_order=nm", 130.0, trial=1)]
    best = best_configurations(rows, Rule())
    assert export(best, tmp_path / "best.toml") == 1
    entry = tomllib.loads((tmp_path / "best.toml").read_text())["best"][0]
    assert entry["tunables"] == {"tile_m": 128, "loop_order": "mn"} and entry["shape"] == {
        "M": 512,
        "K": 1024,
        "N": 2048,
    }
    assert (entry["kernel"], entry["row_id"], entry["tried"]) == ("matmul", rows[0].row_id, 2)
    assert entry["latency_median_us"] == pytest.approx(rows[0].latency_median_us, abs=1e-3)
    assert json.loads(_export_json(best, tmp_path))["best"][0]["tunables"]["tile_m"] == 128
    with pytest.raises(UsageError, match="--export-best .*: no shape"):
        export([], tmp_path / "none.toml")
    with pytest.raises(UsageError, match="cannot write it"):
        export(best, tmp_path / "missing-folder" / "best.toml")
    assert not (tmp_path / "none.toml").exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "best.json",
        "best.toml",
    ]


def _export_json(best, folder) -> str:
    export(best, folder / "best.json")
    return (folder / "best.json").read_text()


def test_the_matrix_shows_a_compiler_failing_only_at_lnc2():
    at_1 = [_config(f"tile_m={t}", 100.0 + t, lnc=1) for t in (32, 64, 128)]
    at_2 = [replace(r, lnc=2, row_id=r.row_id + "/2") for r in at_1]
    at_2[0] = replace(at_2[0], status="failed", error_stage="compile", latency_median_us=None, total_time_us=None)
    cells = {(c["toolchain"], c["lnc"]): c for c in matrix_rows(latest(at_1 + at_2))}
    assert (cells["2.21", 1]["compiled"], cells["2.21", 1]["correct"]) == ("3/3", "3/3")
    assert (cells["2.21", 2]["traced"], cells["2.21", 2]["compiled"], cells["2.21", 2]["correct"]) == (
        "3/3",
        "2/3",
        "2/3",
    )
    assert cells["2.21", 1]["over_points"] == cells["2.21", 2]["over_points"] == 2  # like with like
    assert matrix_rows(latest(at_1)) == []  # one toolchain and one LNC: nothing to lay out


def test_the_matrix_is_per_platform_and_a_plain_multi_platform_sweep_has_none():
    """trn2 at its default LNC 2 beside trn1 at its only LNC 1 is two platforms, not an LNC comparison."""
    trn2 = [_config(f"tile_m={t}", 100.0 + t) for t in (32, 64)]
    trn1 = [replace(r, platform="trn1", lnc=1, row_id=r.row_id + "/trn1") for r in trn2]
    assert matrix_rows(latest(trn2 + trn1)) == []
    trn2_lnc1 = [replace(r, lnc=1, row_id=r.row_id + "/lnc1") for r in trn2]
    cells = {(c["platform"], c["lnc"]): c for c in matrix_rows(latest(trn2 + trn2_lnc1 + trn1))}
    assert set(cells) == {("trn2", 1), ("trn2", 2), ("trn1", 1)}
    assert cells["trn2", 1]["points"] == cells["trn1", 1]["points"] == 2  # trn1's rows are not in trn2's LNC 1 cell


def test_two_named_toolchains_of_one_run_compare_by_compiler_version():
    old = [_config(f"tile_m={t}", 100.0, toolchain_name="2.21", compiler_version="2.21.1.0") for t in (64, 128)]
    new = [
        replace(
            _config(r.tunables or "", 120.0),
            row_id=r.row_id + "/new",
            toolchain_name="2.22",
            compiler_version="2.22.1.0",
        )
        for r in old
    ]
    c = compare_versions(old + new, "compiler", "2.21", "2.22")
    # one run a side, two points and no history: the run's own shift is unknown, so +20% is a suspect
    assert [(p.outcome, p.suspect) for p in c.points] == [("inconclusive", True)] * 2 and c.exit_code == 3
    assert c.key_names[-1] == "variant" and {p.key[-1] for p in c.points} == {"tile_m=64", "tile_m=128"}


def test_the_html_report_shows_the_best_table_the_progress_chart_and_the_matrix():
    from datetime import UTC, datetime

    from kernelsweep.report.html import bundle
    from kernelsweep.report.load import Selection
    from kernelsweep.report.summary import Report

    rows = [_config(f"tile_m={t}", 100.0 + t, trial=i) for i, t in enumerate((32, 64, 128))]
    rows += [replace(r, lnc=1, row_id=r.row_id + "/1", search_trial=None) for r in rows]
    newest = latest(rows)
    built = Report(
        results_uri="results", selection=Selection(), generated_at=datetime.now(UTC), latest=newest, histories=[],
        regressions=[], platforms=["trn2"], cross=[], best=best_configurations(rows, Rule()),
        search_progress=progress(rows), matrix=matrix_rows(newest),
    )  # fmt: skip
    files = bundle(built)
    page = files["index.html"].decode()
    assert list(files) == ["index.html"]  # every chart embedded once, none beside the page
    assert "<h2>Best configuration per shape</h2>" in page and "<h2>Kernel x toolchain x LNC</h2>" in page
    assert page.count("tile_m=32") >= 2  # the best at LNC 2 and at LNC 1, each its own shape row
    assert "data-file='search-matmul.png'" in page
