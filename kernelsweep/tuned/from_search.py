"""A run's rows as a report reads them, so a search's winners are judged by the report's own rule
before they go to the tuned store (kernelsweep.flows.contest)."""

from __future__ import annotations

from datetime import date

from kernelsweep.report.load import COLUMNS, ReportRow, typed
from kernelsweep.results.rows import Row


def as_report_row(row: Row, run_date: date) -> ReportRow:
    record_ = row.record()
    return ReportRow(**typed({c: record_.get(c) for c in COLUMNS} | {"run_date": run_date}))
