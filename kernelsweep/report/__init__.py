"""What the results say: the latest result per point, comparisons with verdicts, regressions over
time with their causes, % of each platform's peak, charts and the HTML report.

Plain Python on the results dataset (never Prefect): `kernelsweep report` / `compare` and the
`report` flow are thin layers over `summary.build_report` and `compare`. docs/reports.md explains
the statistics.
"""
