"""What the site's pages show, as plain data: per kernel every series' successful runs (time, median,
run) and its steps with their cause and status; for the overview the kernels, platforms, latest
night and regressions. Everything comes from the report's index (kernelsweep.report.index.Indexed:
a few columns per row, never whole rows) and the report's change points, so a year of nights costs
the report's memory, not the dataset's.

Each kernel also gets a fingerprint of what the index knows of its rows (how many, when each
started, its status) and of its steps' statuses: a kernel whose fingerprint is unchanged since
the last build keeps its pages and data as they are.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kernelsweep.report.index import Indexed
from kernelsweep.report.index_table import codes, dictionary
from kernelsweep.report.load import SeriesKey
from kernelsweep.report.regress import Step
from kernelsweep.report.summary import Report
from kernelsweep.site.triage import status

DAY_MS = 86_400_000
POINTS = ("t", "m", "lo", "hi", "run")  # a series' columns of points, one file per series


@dataclass(frozen=True)
class SeriesData:
    key: SeriesKey
    rows: np.ndarray  # the index rows of its successful runs, oldest first
    lnc: str
    toolchain: str
    steps: list[Step]

    @property
    def label(self) -> str:
        return " ".join(part for part in self.key[1:] if part)


@dataclass(frozen=True)
class KernelData:
    kernel: str
    series: list[SeriesData]
    fingerprint: str


def slug(kernel: str) -> str:
    """A file-name-safe name for a kernel's files (kernel names are Python identifiers, mostly)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in kernel)
    return safe if safe == kernel else f"{safe}-{hashlib.sha256(kernel.encode()).hexdigest()[:8]}"


def kernels(results: Indexed, report: Report, salt: str) -> list[KernelData]:
    """Every kernel's series and fingerprint; `salt` (the site's format and options) is in each."""
    table = results.table
    steps: dict[SeriesKey, list[Step]] = {h.series: h.steps for h in report.histories}
    lnc, toolchain = _latest_text(results.table.take(pa.array([end - 1 for _, _, end in results.groups])))
    grouped: dict[str, list[SeriesData]] = {}
    for i, ((key, _, _), rows) in enumerate(zip(results.groups, results.successful().values(), strict=True)):
        grouped.setdefault(key[0], []).append(SeriesData(key, rows, lnc[i], toolchain[i], steps.get(key, [])))
    fingerprints = _row_fingerprints(table)
    out = []
    for kernel, series in grouped.items():
        marks = [(s.label, step.first_after.row_id, step.direction, *status(report, step)) for s in series
                 for step in s.steps]  # fmt: skip
        digest = hashlib.sha256(f"{salt}|{fingerprints[kernel]}|{marks!r}".encode()).hexdigest()
        out.append(KernelData(kernel, series, digest))
    return out


def _latest_text(table: pa.Table) -> tuple[list[str], list[str]]:
    """Per row (each series' newest) its LNC and toolchain as a filter shows them (a named toolchain,
    else the compiler version)."""
    lnc = [str(v) if v is not None else "" for v in table.column("lnc").to_pylist()]
    named = pc.cast(table.column("toolchain_name"), pa.string())
    compiler = pc.cast(table.column("compiler_version"), pa.string())
    toolchain = pc.if_else(pc.is_null(named), compiler, named).fill_null("").to_pylist()
    return lnc, [str(t).split("+")[0] for t in toolchain]


def _row_fingerprints(table: pa.Table) -> dict[str, str]:
    """Per kernel: its row count and sums of each row's start time and status (wrapping integers):
    a new row, a re-executed row (a new start) or a changed status changes it."""
    kernel = codes(table, "kernel")
    started = pc.cast(table.column("started_at"), pa.int64()).fill_null(0).to_numpy().astype(np.uint64)
    state = codes(table, "status").astype(np.uint64)
    names = dictionary(table, "kernel")
    out = {}
    for code in np.unique(kernel).tolist():
        mine = kernel == code
        with np.errstate(over="ignore"):
            total = int(started[mine].sum(dtype=np.uint64)), int((state[mine] * np.uint64(2654435761)).sum())
        out[names[code] or ""] = f"{int(mine.sum())}:{total[0]}:{total[1]}"
    return out


def times_ms(results: Indexed) -> np.ndarray:
    """Each index row's time for a chart's x axis, ms since the epoch: its start, else its run date."""
    table = results.table
    started = pc.cast(pc.cast(table.column("started_at"), pa.timestamp("ms", tz="UTC"), safe=False), pa.int64())
    days = pc.cast(pc.cast(table.column("run_date"), pa.date32()), pa.int32()).to_numpy(zero_copy_only=False)
    return np.where(pc.is_null(started).to_numpy(zero_copy_only=False), days.astype(np.int64) * DAY_MS,
                    started.fill_null(0).to_numpy())  # fmt: skip


def kernel_payload(
    data: KernelData,
    results: Indexed,
    report: Report,
    intervals: tuple[np.ndarray, np.ndarray],
    times: np.ndarray,
) -> dict[str, Any]:
    """A kernel page's data: each series' points as columns (`POINTS`) and its steps with cause and status."""
    table = results.table
    run_codes = codes(table, "flow_run_id")
    run_names = dictionary(table, "flow_run_id")
    runs: dict[str, int] = {}
    low, high = intervals
    series = []
    for number, s in enumerate(data.series):
        rows = s.rows
        ids = table.column("row_id").take(pa.array(rows, pa.int64())).to_pylist() if s.steps else []
        index = {row_id: i for i, row_id in enumerate(ids)}
        series.append(
            {
                "id": number,
                "label": s.label,
                "shape": s.key[1],
                "dtype": s.key[2],
                "platform": s.key[3],
                "variant": s.key[4],
                "lnc": s.lnc,
                "toolchain": s.toolchain,
                "t": times[rows].tolist(),
                "m": _significant(results.latency[rows]),
                "lo": _significant(low[rows]),
                "hi": _significant(high[rows]),
                "run": [runs.setdefault(run_names[c] or "", len(runs)) if c >= 0 else -1 for c in run_codes[rows]],
                "steps": [_step(report, step, index) for step in s.steps],
            }
        )
    return {"kernel": data.kernel, "runs": list(runs), "series": series}


def _step(report: Report, step: Step, index: dict[str, int]) -> dict[str, object]:
    state, note = status(report, step)
    return {
        "at": index.get(step.first_after.row_id),
        "night": step.first_after.run_date.isoformat(),
        "direction": step.direction,
        "change": _percent(step.effect.change),
        "low": _percent(step.effect.low - 1),
        "high": _percent(step.effect.high - 1),
        "cause": step.cause,
        "state": state,
        "note": note,
    }


def _percent(fraction: float) -> float | None:
    return round(100 * fraction, 1) if math.isfinite(fraction) else None


def _significant(values: np.ndarray) -> list[float | None]:
    """Five significant digits (a chart needs no more; the JSON is a third the size), NaN as null."""
    return [None if v != v else float(f"{v:.5g}") for v in values.tolist()]


def overview(results: Indexed, report: Report, pages: dict[str, str], numbers: dict[SeriesKey, int]) -> dict[str, Any]:
    """The overview's data: kernels, platforms (the fleet's families), the latest night, regressions."""
    newest = max((r.run_date for r in report.latest), default=date.min)
    runs = results.runs_newest_first()
    latest_run = runs[0] if runs else None
    tonight = [r for r in report.latest if r.flow_run_id == latest_run]
    kernels_ = []
    for kernel in results.kernels():
        mine = [r for r in report.latest if r.kernel == kernel]
        kernels_.append(
            {
                "kernel": kernel,
                "page": pages[kernel],
                "series": len(mine),
                "platforms": sorted({r.platform for r in mine}),
                "latest_night": max(r.run_date for r in mine).isoformat() if mine else None,
                "failed": sum(not r.ok for r in mine),
                "open": sum(s.series[0] == kernel for s in report.open_regressions),
            }
        )
    families = sorted({r.platform for r in report.latest})
    return {
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "results": report.results_uri,
        "simulated": report.is_simulation,
        "latest_night": newest.isoformat() if report.latest else None,
        "latest_run": latest_run,
        "previous_run": runs[1] if len(runs) > 1 else None,
        "latest_points": len(tonight),
        "latest_failed": sum(not r.ok for r in tonight),
        "families": [
            {
                "platform": p,
                "kernels": len({r.kernel for r in report.latest if r.platform == p}),
                "series": sum(r.platform == p for r in report.latest),
            }
            for p in families
        ],  # fmt: skip
        "kernels": kernels_,
        "regressions": [_regression(report, step, pages, numbers, newest) for step in report.regressions],
    }


def _regression(
    report: Report, step: Step, pages: dict[str, str], numbers: dict[SeriesKey, int], newest: date
) -> dict[str, object]:
    return {
        "kernel": step.series[0],
        "series": " ".join(part for part in step.series[1:] if part),
        "series_id": numbers[step.series],
        "page": pages[step.series[0]],
        **_step(report, step, {}),
        "age_nights": (newest - step.first_after.run_date).days,
    }
