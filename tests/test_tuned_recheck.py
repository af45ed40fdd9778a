"""The re-check on a new SDK (issue 36, done when): after a simulated compiler bump that moves the best
of one shape (kernelsweep/sim/sdk_tuning.py: from 2.22 the matmul's `mn` order runs at 0.7x where
N >= 2048), one re-check re-tunes exactly that key, and every key's stored best on the new SDK is the
exhaustive grid's best on it, within the verdict's threshold."""

from __future__ import annotations

import pytest
from specs import sim_spec

from kernelsweep.report.stats import DEFAULT_THRESHOLD
from kernelsweep.report.summary import build_report
from kernelsweep.results import reader
from kernelsweep.tuned.recheck import recheck
from kernelsweep.tuned.record import record
from kernelsweep.tuned.store import TunedStore

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

SHAPES = (
    {"M": [512], "K": [1024], "N": [2048]},
    {"M": [2048], "K": [1024], "N": [2048]},
    {"M": [1024], "K": [1024], "N": [1024]},
)
# four configurations per shape; modelled on 2.21 the `nm` order at tile_k=128 is best and `mn` the runner-up
TUNABLES = {"tile_m": [128], "tile_n": [512], "tile_k": [64, 128], "loop_order": ["mn", "nm"]}
NEW_COMPILER = "2.22.41000.0"


def _blocks(search: dict | None = None) -> list[dict]:
    blocks = [{"kernel": "matmul", "dtypes": ["bfloat16"], "grid": g, "tunables": TUNABLES} for g in SHAPES]
    return [b | {"search": search} for b in blocks] if search else blocks


def test_after_an_sdk_bump_one_recheck_retunes_exactly_the_keys_whose_best_moved(tmp_path, monkeypatch):
    from kernelsweep.flows.sweep import sweep

    results = str(tmp_path / "results")
    sweep(sim_spec(tmp_path, _blocks(), name="grid"))  # the exhaustive grid on 2.21, its bests stored
    store = TunedStore(results)
    record(store, build_report(results).best, by="report")
    old = {e["key"]["shape"]: e for e in store.entries()}
    assert {e["best"]["tunables"]["loop_order"] for e in old.values()} == {"nm"}

    monkeypatch.setenv("KERNELSWEEP_SIM_COMPILER_VERSION", NEW_COMPILER)
    outcome = recheck(sim_spec(tmp_path, _blocks({"budget": 4, "seed": 1}), name="nightly"), sweep)
    assert [before["key"]["shape"] for before, _ in outcome.retuned] == ["M=512,K=1024,N=2048"]
    assert sorted(c.key["shape"] for c in outcome.held) == ["M=1024,K=1024,N=1024", "M=2048,K=1024,N=2048"]
    (_, now), *_ = outcome.retuned
    assert now is not None and now["history"][0]["tunables"] == old["M=512,K=1024,N=2048"]["best"]["tunables"]
    assert "lies above" in now["history"][0]["why"]  # the store says why it changed

    sweep(sim_spec(tmp_path, _blocks(), name="truth"))  # the exhaustive grid on the new SDK
    truth: dict[str, dict[str, float]] = {}
    for r in reader.read(results).to_pylist():
        if r["sweep"] == "truth":
            assert r["compiler_version"].startswith(NEW_COMPILER)
            truth.setdefault(r["shape"], {})[r["tunables"]] = r["latency_median_us"]  # tile_m=128,...
    stored = [e for e in store.entries() if e["key"]["sdk"]["compiler"].startswith(NEW_COMPILER)]
    assert len(stored) == 3
    for e in stored:
        grid = truth[e["key"]["shape"]]
        mine = ",".join(f"{n}={v}" for n, v in e["best"]["tunables"].items())
        assert grid[mine] <= min(grid.values()) * (1 + DEFAULT_THRESHOLD), (e["key"]["shape"], mine, grid)
    rechecked = sum(r["sweep"].startswith("nightly") for r in reader.read(results).to_pylist())
    resweep = sum(len(truth[s]) for s in truth)
    print(f"\nre-check: {rechecked} points measured, 1 of 3 keys re-tuned; the full re-sweep: {resweep} points")
