"""The tuned store's flows: a search's winner confirmed before it enters the store (a contest,
kernelsweep.tuned.contest, against the stored best or its runner-up), and the re-check on a new SDK;
each contest round and re-tune a `sweep` subflow run, so its rows are stored and linked like any
other run's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from prefect import flow

from kernelsweep.report.best import Best, best_configurations
from kernelsweep.report.load import ReportRow
from kernelsweep.report.stats import Rule
from kernelsweep.results.rows import Row
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.tuned.contest import Contest, run_contests
from kernelsweep.tuned.from_search import as_report_row
from kernelsweep.tuned.keys import numbers
from kernelsweep.tuned.recheck import Outcome, recheck
from kernelsweep.tuned.record import Change, entry_key, record
from kernelsweep.tuned.store import TunedStore


def confirm_searches(
    spec: SweepSpec, targets: Sequence[SearchTarget], rows: Sequence[Row], run_date: date
) -> list[Change]:
    """Each searched shape's winner into the tuned store, confirmed first: measured again against the
    stored best (when the store holds a different one) or else its runner-up, and recorded by the
    store's rule from those rows (a clear win replaces, a tie keeps the incumbent)."""
    searched = [as_report_row(r, run_date) for r in rows if r.search_trial is not None]
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
    from kernelsweep.flows.sweep import sweep  # the flow this one is part of

    remeasured = best_configurations(run_contests(spec, contests, sweep), Rule()) if contests else []
    return record(store, settled + remeasured, by="search")


def _target(targets: Sequence[SearchTarget], r: ReportRow) -> SearchTarget:
    for t in targets:
        p = t.point
        if (p.kernel, p.shape, p.dtype, p.platform, p.lnc, p.toolchain_name) == (
            r.kernel, r.shape, r.dtype, r.platform, r.lnc, r.toolchain_name or ""
        ):  # fmt: skip
            return t
    raise LookupError(f"no search target for {r.kernel} {r.shape} {r.dtype} {r.platform}")


@flow(name="tuned-recheck", flow_run_name="tuned-recheck-{spec.name}")
def recheck_flow(spec: SweepSpec) -> Outcome:
    """`kernelsweep tuned recheck`: the re-check (kernelsweep.tuned.recheck), its contests and re-tunes
    each a `sweep` subflow run."""
    from kernelsweep.flows.sweep import sweep

    return recheck(spec, sweep)
