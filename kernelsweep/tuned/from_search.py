"""A finished search's winners into the tuned store: the run's search rows read as a report reads
them, each searched shape's best and runner-up judged by the verdict rule, recorded by `record`'s
rule (a different configuration must win clearly to replace a stored best)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from kernelsweep.report.best import best_configurations
from kernelsweep.report.load import COLUMNS, ReportRow, typed
from kernelsweep.report.stats import Rule
from kernelsweep.results.rows import Row
from kernelsweep.stores.locations import Location
from kernelsweep.tuned.record import Change, record
from kernelsweep.tuned.store import TunedStore


def as_report_row(row: Row, run_date: date) -> ReportRow:
    record_ = row.record()
    return ReportRow(**typed({c: record_.get(c) for c in COLUMNS} | {"run_date": run_date}))


def record_search(
    results: Location | str, rows: Sequence[Row], run_date: date, rule: Rule | None = None
) -> list[Change]:
    """Each searched shape of these rows into the store beside `results`; what happened to each."""
    searched = [as_report_row(r, run_date) for r in rows if r.search_trial is not None]
    return record(TunedStore(results), best_configurations(searched, rule or Rule()), by="search")
