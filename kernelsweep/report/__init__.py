"""What the results say: the latest result per point, comparisons with verdicts, regressions over
time with their causes, % of each platform's peak, charts and the HTML report.

Plain Python on the results dataset (never Prefect): `kernelsweep report` / `compare` and the
`report` flow are thin layers over `summary.build_report` and `compare`. docs/reports.md explains
the statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.report.compare import Comparison, compare_kernels, compare_runs, compare_versions
    from kernelsweep.report.load import ReportRow, Selection
    from kernelsweep.report.publish import report_location, write_bundle
    from kernelsweep.report.retention import prune_reports
    from kernelsweep.report.stats import Rule
    from kernelsweep.report.summary import Report, build_report

__all__ = [
    "Comparison",
    "Report",
    "ReportRow",
    "Rule",
    "Selection",
    "build_report",
    "compare_kernels",
    "compare_runs",
    "compare_versions",
    "prune_reports",
    "report_location",
    "write_bundle",
]
__getattr__ = public_face(__name__, __file__)
