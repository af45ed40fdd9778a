"""Effort levels and early dropping (issue 36, item 7): `effort` sets a search's budget, captures per
trial and when a trial may stop; a trial whose first captures lie clearly above the best so far is
captured no further, and its row says so by its repeats."""

from __future__ import annotations

import optuna
import pytest
from stage_context import point, sim_context

from kernelsweep.errors import UsageError
from kernelsweep.results.row_parts import Costed, measured_of
from kernelsweep.results.rows import Row, row_id
from kernelsweep.search.dropping import bar
from kernelsweep.search.study import ShapeSearch
from kernelsweep.stages import capture_stage, compile_stage, extract_stage, inputs_stage, trace_stage
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.point import Point


def _target(search: dict, repeats: int = 1) -> SearchTarget:
    block = {"kernel": "matmul", "dtypes": ["bfloat16"], "grid": {"M": [512], "K": [256], "N": [1024]}}
    spec = parse_spec(
        {"name": "t", "platforms": ["trn2"], "toolchain": "sim", "capture": {"repeats": repeats},
         "kernels": [{**block, "search": search}]}
    )  # fmt: skip
    target = next(iter(expand_spec(spec).targets))
    assert isinstance(target, SearchTarget)
    return target


@pytest.mark.parametrize(
    ("search", "budget", "repeats", "drop_after"),
    [
        ({"effort": "quick"}, 8, 5, 2),
        ({}, 16, None, 2),  # what a search did before: 16 trials of the spec's repeats
        ({"effort": "thorough"}, 48, 9, 3),
        ({"effort": "quick", "budget": 12, "drop_after": 0}, 12, 5, 0),  # the block's own values win
    ],
)
def test_an_effort_level_sets_the_budget_repeats_and_drop_the_block_does_not(search, budget, repeats, drop_after):
    settings = _target(search).settings
    assert (settings.budget, settings.repeats, settings.drop_after) == (budget, repeats, drop_after)


def test_an_unknown_effort_is_one_line_naming_the_levels():
    with pytest.raises(UsageError) as info:
        _target({"effort": "fast"})
    assert "\n" not in info.value.message and "'quick', 'default' or 'thorough'" in info.value.message


def _row(p: Point, latencies: list[float]) -> Row:
    return Row(
        row_id=row_id("run", p), sweep="t", kernel=p.kernel, kernel_ref=p.kernel_ref, shape=p.shape, params=p.params,
        dtype=p.dtype, platform=p.platform, lnc=p.lnc, seed=0, toolchain="sim", is_simulation=True, status="ok",
        flow_run_id="run", latency_median_us=sorted(latencies)[len(latencies) // 2], latencies_us=latencies,
        repeats=len(latencies), correct=True, tunables=p.tunables_text,
    )  # fmt: skip


def test_trials_carry_their_effort_and_after_the_first_the_best_so_fars_bar():
    search = ShapeSearch.open(_target({"effort": "quick"}), optuna.storages.InMemoryStorage(), lambda p: None)
    [first] = search.propose(1)
    assert (first.repeats, first.drop) == (5, None)  # nothing measured yet: nothing to be clearly slower than
    search.record(first, _row(first, [100.0, 101.0, 99.0, 100.5, 99.5]))
    [second] = search.propose(1)
    assert second.repeats == 5 and second.drop is not None
    assert (second.drop.after, second.drop.best_us, second.drop.best) == (2, [100.0, 101.0, 99.0, 100.5, 99.5],
                                                                          first.tunables_text)  # fmt: skip
    assert second.point_id != first.point_id and second.point_id == second.model_copy(update={"drop": None}).point_id


def test_no_bar_where_the_captures_cannot_bound_the_rule_s_interval():
    """3 captures of the best against 2 of a trial: at most 10 orders, p >= 0.1, never below alpha."""
    assert bar(2, [100.0, 101.0, 99.0], "x") is None
    assert bar(0, [100.0] * 5, "x") is None  # drop_after = 0: off
    assert bar(2, [100.0] * 5, "x") is not None


def _measured(tmp_path, best_us: list[float] | None):
    ctx = sim_context(tmp_path, repeats=5)
    p = point()
    if best_us is not None:
        p = p.model_copy(update={"drop": bar(2, best_us, "tile=best")})
    compiled, inputs = compile_stage(ctx, p, trace_stage(ctx, p)), inputs_stage(ctx, p)
    captured = capture_stage(ctx, p, compiled, inputs)
    return captured, extract_stage(ctx, p, compiled, inputs, captured)


def test_a_trial_clearly_slower_than_the_best_stops_after_its_first_captures(tmp_path):
    full, extracted = _measured(tmp_path / "full", None)
    assert len(full.ntffs) == 5 and extracted.latency.repeats == 5
    latency = extracted.latency.median_us
    # the best so far 30% faster than this point: its first two captures end it
    dropped, kept = _measured(tmp_path / "dropped", [latency / 1.3 * f for f in (0.99, 1.0, 1.01, 0.995, 1.005)])
    assert len(dropped.ntffs) == 2 and kept.latency.repeats == 2
    why = measured_of(point(), Costed(), kept).dropped_reason  # the row's column says why, not only the log
    assert why == dropped.dropped and why.startswith("dropped after 2 capture(s)") and "(tile=best)" in why
    assert kept.latency.median_us == pytest.approx(latency, rel=0.05)  # a real measurement of the two, not a number
    # the best so far as fast as this point: not clearly slower, so every capture is taken
    close, measured = _measured(tmp_path / "close", [latency * f for f in (0.99, 1.0, 1.01, 0.995, 1.005)])
    assert len(close.ntffs) == 5 and measured.latency.repeats == 5 and close.dropped is None
    assert measured_of(point(), Costed(), measured).dropped_reason is None and full.dropped is None
