"""What a comparison judges: the kernel's latency (the default), or what its compile cost.

`compare --metric compile_seconds|compile_peak_rss` judges compile time or compiler peak memory
with the same statistics as latency: each row of a compile is one sample of its run (a compile is
measured once per run; a cached one is not measured and is left out, a failed one still counts as a
failure), and the series' other runs with the same lineage give the run-to-run spread, so verdicts
across compiler versions come from runs that compiled. Rows are re-expressed so that the
comparison's latency fields hold the chosen measure: the machinery is the latency one, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kernelsweep.errors import UsageError
from kernelsweep.report.load import ReportRow
from kernelsweep.report.series_query import Results


@dataclass(frozen=True)
class Measure:
    name: str
    column: str | None  # the row's column; None: latency as rows already hold it
    unit: str
    scale: float = 1.0  # from the column's unit to `unit`


MEASURES = {
    "latency": Measure("latency", None, "us"),
    "compile_seconds": Measure("compile_seconds", "compile_seconds", "s"),
    "compile_peak_rss": Measure("compile_peak_rss", "compile_peak_rss_bytes", "MiB", 2**-20),
}


def measure(name: str) -> Measure:
    try:
        return MEASURES[name]
    except KeyError:
        raise UsageError(f"--metric {name}: use one of {', '.join(MEASURES)}") from None


def as_measure(rows: Results | list[ReportRow], chosen: Measure) -> Results | list[ReportRow]:
    """Rows whose latency is the chosen measure: one sample per row; ok rows without it (a cached
    compile) are left out, failed rows stay (a compile that fails is a regression in any measure).
    A compile measure reads every selected row whole (latency needs only the indexed columns)."""
    if chosen.column is None:
        return rows
    out = []
    for row in rows if isinstance(rows, list) else rows.select("status", lambda _: True):
        value = getattr(row, chosen.column)
        if row.ok and value is None:
            continue
        v = None if value is None else float(value) * chosen.scale
        out.append(
            replace(
                row,
                repeats=1 if v is not None else None,
                latency_median_us=v,
                latency_min_us=v,
                latency_max_us=v,
                latency_p90_us=v,
                latency_p99_us=v,
                latencies_us=[v] if v is not None else None,
                total_time_us=v,
                iteration_latencies_us=None,
            )
        )
    return out
