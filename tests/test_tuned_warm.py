"""Warm starts (issue 36): a search first tries the tuned store's bests at the nearest shapes of its
kernel, platform and LNC; a resumed study is left as it was. The real study code on Optuna's memory
storage, no Prefect."""

from __future__ import annotations

import optuna
from specs import sim_spec

from kernelsweep.search.study import ShapeSearch
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.tuned.warm import seeds


def _entry(shape: str, best: dict, runner_up: dict | None = None, *, compiler: str = "2.21", **key) -> dict:
    k = {"kernel": "matmul", "shape": shape, "dtype": "bfloat16", "platform": "trn2", "lnc": 2} | key
    return {
        "key": k | {"sdk": {"compiler": compiler}},
        "best": {"tunables": best},
        "runner_up": {"tunables": runner_up} if runner_up else None,
    }


def _target(tmp_path) -> SearchTarget:
    block = {"kernel": "matmul", "grid": {"M": [512], "K": [1024], "N": [2048]}, "search": {"budget": 4, "seed": 3}}
    block["tunables"] = {"tile_m": [64, 128], "tile_n": [256, 512], "tile_k": [128], "loop_order": ["mn", "nm"]}
    target = next(iter(expand_spec(sim_spec(tmp_path, [block])).targets))
    assert isinstance(target, SearchTarget)
    return target


A = {"tile_m": 128, "tile_n": 512, "tile_k": 128, "loop_order": "nm"}
B = {"tile_m": 64, "tile_n": 256, "tile_k": 128, "loop_order": "mn"}
C = {"tile_m": 128, "tile_n": 256, "tile_k": 128, "loop_order": "nm"}


def test_the_nearest_shapes_best_comes_first_then_its_runner_up(tmp_path):
    point = _target(tmp_path).point
    entries = [
        _entry("M=4096,K=1024,N=2048", C),  # three octaves away
        _entry("M=1024,K=1024,N=2048", A, B),  # one octave away
        _entry("M=2048,K=1024,N=2048", A),  # two octaves away, the same best: tried once
        _entry("M=512,K=1024,N=2048", C, platform="trn1"),  # another platform
        _entry("M=512,K=1024,N=2048", C, lnc=1),  # another LNC
        _entry("M=512,K=1024", C),  # another set of dimensions
    ]
    assert seeds(entries, point, 3) == [A, B, C]
    assert seeds(entries, point, 1) == [A]
    newer = _entry("M=1024,K=1024,N=2048", C, compiler="2.22")  # the same distance on a newer SDK goes first
    assert seeds([*entries, newer], point, 1) == [C]


def test_a_fresh_study_measures_the_seeds_first_and_a_resumed_one_is_not_seeded(tmp_path):
    target = _target(tmp_path)
    storage = optuna.storages.InMemoryStorage()
    search = ShapeSearch.open(target, storage, lambda p: None)
    outside = {**A, "tile_n": 1024}  # not among the block's tunables: skipped
    assert search.seed([B, outside, A]) == 2
    assert [p.tunables for p in search.propose(2)] == [B, A]
    again = ShapeSearch.open(target, storage, lambda p: None)
    assert again.seed([C]) == 0
