"""The tuned store (issue 36): one sealed entry per key beside the results, the rule a new best must
pass to replace a stored one, the file a model's code loads, and the lookup's fallbacks. Rows are made
directly (tests/report_rows.py); the S3 store is moto's server over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from report_rows import row

from kernelsweep.errors import StoreError
from kernelsweep.report.best import best_configurations
from kernelsweep.report.stats import Rule
from kernelsweep.tuned import DEFAULTS, EXACT, NEAREST, OLDER_SDK, best, read_table
from kernelsweep.tuned.export import write
from kernelsweep.tuned.record import CONFIRMED, KEPT, NEW, REPLACED, record
from kernelsweep.tuned.store import TunedStore

SHAPE = "M=512,K=1024,N=2048"
RNG = np.random.default_rng(36)
AT = datetime(2026, 11, 1, tzinfo=UTC)


def _config(tunables: str, centre: float, *, shape: str = SHAPE, run: str = "run-0", compiler: str = "2.21"):
    values = list(centre * (1 + 0.003 * RNG.standard_normal(10)))
    made = row(kernel="matmul", shape=shape, latencies=values, run=run, compiler=compiler)
    named = compiler if compiler != "2.21" else None  # a second SDK is a named toolchain of its own series
    return replace(
        made, row_id=f"{made.row_id}/{tunables}", tunables=tunables, lnc=2, search_trial=0, toolchain_name=named
    )


def _bests(*configs):
    return best_configurations(list(configs), Rule())


def test_a_new_best_enters_the_same_one_is_confirmed_a_clear_win_replaces_and_a_tie_keeps(tmp_path):
    store = TunedStore(str(tmp_path / "results"))
    first = record(store, _bests(_config("tile_m=128", 100.0), _config("tile_m=64", 120.0)), by="search", at=AT)
    assert [c.action for c in first] == [NEW]
    (entry,) = store.entries()
    assert entry["best"]["tunables"] == {"tile_m": 128} and entry["runner_up"]["tunables"] == {"tile_m": 64}
    assert entry["best"]["row_id"] == "run-0/matmul/M=512,K=1024,N=2048/trn2/tile_m=128"  # lineage
    assert entry["gap"]["verdict"] == "clear win" and 1.15 < entry["gap"]["ratio"] < 1.25
    low, high = entry["best"]["median_interval_us"]
    assert low < entry["best"]["latency_median_us"] < high
    assert entry["key"]["sdk"] == {"compiler": "2.21", "runtime": "r", "nki": "0.6"} and entry["key"]["lnc"] == 2
    assert (entry["confirmed"]["by"], entry["confirmed"]["at"]) == ("search", "2026-11-01T00:00:00+00:00")

    rerun = _bests(_config("tile_m=128", 101.0, run="run-1"), _config("tile_m=32", 150.0, run="run-1"))
    again = record(store, rerun, by="report")
    assert [c.action for c in again] == [CONFIRMED] and store.entries()[0]["best"]["flow_run_id"] == "run-1"

    # a challenger within the noise of its runner-up: a tie keeps the incumbent, and the challenge is noted
    tie = _bests(_config("tile_m=256", 100.0, run="run-2"), _config("tile_m=128", 100.2, run="run-2"))
    assert tie[0].verdict == "tie" and [c.action for c in record(store, tie, by="search")] == [KEPT]
    kept = store.entries()[0]
    assert kept["best"]["tunables"] == {"tile_m": 128} and kept["last_challenge"]["tunables"] == {"tile_m": 256}

    clear = _bests(_config("tile_m=256", 80.0, run="run-3"), _config("tile_m=128", 100.0, run="run-3"))
    assert [c.action for c in record(store, clear, by="search")] == [REPLACED]
    replaced = store.entries()[0]
    assert replaced["best"]["tunables"] == {"tile_m": 256}
    assert replaced["history"][0]["tunables"] == {"tile_m": 128} and "lies above" in replaced["history"][0]["why"]


def test_each_sdk_and_lnc_is_its_own_key(tmp_path):
    store = TunedStore(str(tmp_path / "results"))
    old = _config("tile_m=128", 100.0)
    new_sdk = _config("tile_m=64", 90.0, compiler="2.22", run="run-1")
    other_lnc = replace(_config("tile_m=32", 95.0, run="run-2"), lnc=1)
    assert [c.action for c in record(store, _bests(old, new_sdk, other_lnc), by="report")] == [NEW, NEW, NEW]
    assert len(store.entries()) == 3


def test_a_hand_edited_entry_is_refused_by_name(tmp_path):
    store = TunedStore(str(tmp_path / "results"))
    record(store, _bests(_config("tile_m=128", 100.0)), by="search")
    (path,) = (tmp_path / "results" / "_tuned" / "entries").iterdir()
    entry = json.loads(path.read_text())
    entry["best"]["latency_median_us"] = 1.0
    path.write_text(json.dumps(entry))
    with pytest.raises(StoreError, match=r"entries/.*\.json: not a tuned entry as kernelsweep wrote it"):
        store.entries()


def test_the_store_on_s3(bucket):
    store = TunedStore(f"s3://{bucket}/results")
    record(store, _bests(_config("tile_m=128", 100.0), _config("tile_m=64", 130.0)), by="search")
    (entry,) = TunedStore(f"s3://{bucket}/results").entries()
    assert entry["best"]["tunables"] == {"tile_m": 128} and store.uri.startswith(f"s3://{bucket}/results/_tuned")


@pytest.fixture
def exported(tmp_path):
    store = TunedStore(str(tmp_path / "results"))
    configs = [
        _config("tile_m=128", 100.0),
        _config("tile_m=64", 50.0, shape="M=2048,K=1024,N=2048"),
        _config("tile_m=32", 40.0, shape="M=2048,K=1024,N=2048", compiler="2.22", run="run-1"),
    ]
    record(store, _bests(*configs), by="report")
    return store, tmp_path


@pytest.mark.parametrize("name", ["tuned.json", "tuned.toml"])
def test_the_lookup_says_whether_it_found_the_key_a_near_shape_an_older_sdk_or_defaults(exported, name):
    store, folder = exported
    path = folder / name
    assert write(store.entries(), store.uri, path) == 3
    ask = {"dtype": "float32", "platform": "trn2", "source": path}
    exact = best("matmul", {"M": 512, "K": 1024, "N": 2048}, **ask, sdk="2.21")
    assert (exact.tunables, exact.match) == ({"tile_m": 128}, EXACT)
    near = best("matmul", "M=1024,K=1024,N=2048", **ask, sdk="2.21")  # one octave from each: the first listed
    assert near.match == NEAREST and "octaves away" in near.why
    nearer = best("matmul", "M=4096,K=1024,N=2048", **ask, sdk="2.21")
    assert (nearer.tunables, nearer.match) == ({"tile_m": 64}, NEAREST) and "M=2048" in nearer.why
    newest = best("matmul", "M=2048,K=1024,N=2048", **ask)  # no SDK named: the newest one's best
    assert (newest.tunables, newest.match) == ({"tile_m": 32}, EXACT)
    older = best("matmul", SHAPE, **ask, sdk="2.22")  # 512 was tuned on 2.21 only
    assert (older.tunables, older.match) == ({"tile_m": 128}, OLDER_SDK) and "not yet on 2.22" in older.why
    never = best("matmul", SHAPE, dtype="bfloat16", platform="trn2", source=path)
    assert never.match == DEFAULTS and never.tunables["tile_m"] == 128 and "no tuned matmul bfloat16" in never.why
    unknown = best("my_kernel", "n=4", dtype="float32", platform="trn2", source=path)
    assert (unknown.tunables, unknown.match) == ({}, DEFAULTS) and "its own defaults" in unknown.why


def test_a_results_folder_is_a_source_too_and_a_hand_edited_export_entry_is_ignored(exported):
    store, folder = exported
    assert best("matmul", SHAPE, dtype="float32", platform="trn2", source=folder / "results").match == EXACT
    path = folder / "tuned.json"
    write(store.entries(), store.uri, path)
    document = json.loads(path.read_text())
    document["tuned"][0]["best"]["tunables"] = {"tile_m": 1}
    path.write_text(json.dumps(document))
    with pytest.warns(UserWarning, match="1 tuned entries do not match their seal"):
        assert len(read_table(path).entries) == 2


def test_reading_a_best_imports_neither_prefect_nor_pyarrow(exported):
    store, folder = exported
    write(store.entries(), store.uri, folder / "tuned.json")
    code = (
        "import sys; from kernelsweep.tuned import best;"
        f"t = best('matmul', {SHAPE!r}, dtype='float32', platform='trn2', source={str(folder / 'tuned.json')!r});"
        "heavy = sorted(m for m in ('prefect', 'pyarrow', 'numpy', 'optuna', 'boto3') if m in sys.modules);"
        "print(t.match, heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "exact []"


def test_a_contest_is_judged_over_every_round_not_the_newest_alone():
    """Three rounds of two configurations: A is 10% faster in two and 1% slower in the newest. The
    report's best table (newest run) would pick B; the contest's verdict over the rounds picks A."""
    from kernelsweep.tuned.contest import contest_bests

    def rounds(tunables: str, centres: list[float]):
        made = []
        for night, centre in enumerate(centres):
            r = _config(tunables, centre, run=f"contest-{night}")
            made.append(replace(r, run_date=r.run_date.replace(day=1 + night), row_id=f"{r.row_id}/{night}"))
        return made

    rows = rounds("tile_m=128", [90.0, 91.0, 101.0]) + rounds("tile_m=64", [100.0, 100.5, 100.0])
    assert _bests(*rows)[0].best.tunables == "tile_m=64"  # the newest run alone
    (judged,) = contest_bests(rows, Rule())
    assert judged.best.tunables == "tile_m=128" and judged.runner_up is not None
    assert judged.gap is not None and judged.gap.runs == (3, 3) and judged.verdict in ("clear win", "inconclusive")
