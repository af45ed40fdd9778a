"""A search's winner confirmed before it enters the tuned store: a contest (kernelsweep.tuned.contest)
against the stored best or its runner-up, each round a `sweep` subflow run of the search's flow (the
flow hands itself in: this module never imports it), so its rows are stored and linked like any
other run's."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from prefect import get_run_logger

from kernelsweep.errors import StoreError
from kernelsweep.report import ReportRow, Rule, Selection
from kernelsweep.report.best import Best, best_configurations
from kernelsweep.report.load import load
from kernelsweep.sweepspec import SweepSpec
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.tuned.contest import Contest, Runner, contest_bests, run_contests
from kernelsweep.tuned.keys import numbers
from kernelsweep.tuned.record import Change, entry_key, record
from kernelsweep.tuned.store import TunedStore


def confirm_searches(spec: SweepSpec, targets: Sequence[SearchTarget], run_ids: Collection[str], run: Runner) -> None:
    """Each searched shape's winner of the runs `run_ids` (a sweep, or a fleet run's search shards) into
    the tuned store, confirmed first: measured again against the stored best (when the store holds a
    different one) or else its runner-up, and recorded
    by the store's rule from those rows (a clear win replaces, a tie keeps the incumbent). The rows are
    stored already: a store that cannot be read or written is a warning (`report --export-best`
    records the report's bests later)."""
    logger = get_run_logger()
    try:
        changes = _confirm(spec, targets, run_ids, run)
    except StoreError as exc:
        logger.warning(f"tuned store not updated: {exc.message}; `kernelsweep report --export-best` records it")
        return
    for change in changes:
        logger.info(f"tuned store: {change.line()}")


def _confirm(spec: SweepSpec, targets: Sequence[SearchTarget], run_ids: Collection[str], run: Runner) -> list[Change]:
    rows = load(spec.results, Selection(sweeps=(spec.name,)))
    searched = [r for r in rows if r.flow_run_id in run_ids and r.search_trial is not None]
    store = TunedStore(spec.results_location)
    settled: list[Best] = []
    contests: list[Contest] = []
    for b in best_configurations(searched, Rule()):
        stored = store.get(entry_key(b.best))
        mine = numbers(b.best.tunables or "")
        if stored is not None and stored["best"]["tunables"] != mine:
            opponent = stored["best"]["tunables"]
        elif stored is None and b.runner_up is not None:
            opponent = numbers(b.runner_up.tunables or "")
        else:  # the stored best won again, or nothing else measured: no contest to run
            settled.append(b)
            continue
        point = _target(targets, b.best).point
        contests.append(
            Contest(
                point.kernel_ref,
                point.params,
                point.dtype,
                point.platform,
                point.lnc,
                point.toolchain_name,
                (mine, opponent),
            )
        )
    remeasured = contest_bests(run_contests(spec, contests, run), Rule()) if contests else []
    return record(store, settled + remeasured, by="search")


def _target(targets: Sequence[SearchTarget], r: ReportRow) -> SearchTarget:
    for t in targets:
        p = t.point
        if (p.kernel, p.shape, p.dtype, p.platform, p.lnc, p.toolchain_name) == (
            r.kernel, r.shape, r.dtype, r.platform, r.lnc, r.toolchain_name or ""
        ):  # fmt: skip
            return t
    raise LookupError(f"no search target for {r.kernel} {r.shape} {r.dtype} {r.platform}")
