"""Report rows made directly (no sweep): for the fast tests of compare, report and their outputs.

`history` builds nights of one or more series with raw repeats drawn like the simulator's noise (a
per-repeat jitter and a per-run shift shared by every point of the run), so verdicts are tested on
the same kind of data the sim writes, in milliseconds.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from kernelsweep.report.load import ReportRow

if TYPE_CHECKING:
    from kernelsweep.report.summary import Report

FIRST = date(2026, 3, 1)


def row(
    *,
    kernel: str = "vector_add",
    shape: str = "n=8192",
    platform: str = "trn2",
    run: str = "run-0",
    night: int = 0,
    latencies: list[float] | None = None,
    status: str = "ok",
    compiler: str = "2.21",
    error: str | None = None,
) -> ReportRow:
    values = np.asarray(latencies if latencies is not None else [100.0], dtype=float)
    ok = status == "ok"
    return ReportRow(
        row_id=f"{run}/{kernel}/{shape}/{platform}",
        sweep="s",
        kernel=kernel,
        shape=shape,
        dtype="float32",
        platform=platform,
        lnc=1,
        status=status,
        error_stage=None if ok else ("check" if status == "incorrect" else "capture"),
        error_class=None if ok else ("IncorrectOutput" if status == "incorrect" else "CaptureError"),
        error_message=error,
        is_simulation=True,
        repeats=len(values),
        latency_median_us=float(np.median(values)),
        latency_min_us=float(values.min()),
        latency_max_us=float(values.max()),
        latency_p90_us=float(np.percentile(values, 90)),
        latency_p99_us=float(np.percentile(values, 99)),
        latencies_us=[float(v) for v in values],
        total_time_us=float(np.median(values)),
        achieved_tflops=1.0,
        mfu_percent=1.0,
        roofline_percent=50.0,
        roofline_us=50.0,
        roofline_bound="memory",
        cost_flops=1000,
        cost_hbm_bytes=4000,
        correct=ok or status != "incorrect",
        compiler_version=compiler,
        runtime_version="r",
        profiler_version="p",
        nki_version="0.6",
        kernel_source_sha256="k",
        instance_type="trn2.sim",
        flow_run_id=run,
        started_at=datetime(2026, 3, 1, tzinfo=UTC) + timedelta(days=night),
        run_date=FIRST + timedelta(days=night),
    )


def nights(
    rng: np.random.Generator,
    shapes: list[str],
    count: int,
    *,
    repeats: int = 10,
    jitter: float = 0.01,
    run_noise: float = 0.0,
    step: dict[str, float] | None = None,
    step_night: int | None = None,
    kernel: str = "vector_add",
) -> list[ReportRow]:
    """`count` nights of every shape; from `step_night` on, shapes in `step` take their factor and a
    new compiler version."""
    rows = []
    for night in range(count):
        shift = 1 + run_noise * rng.standard_normal()
        upgraded = step_night is not None and night >= step_night
        for i, shape in enumerate(shapes):
            factor = (step or {}).get(shape, 1.0) if upgraded else 1.0
            values = 100 * (1 + i) * factor * shift * (1 + jitter * rng.standard_normal(repeats))
            rows.append(
                row(
                    kernel=kernel,
                    shape=shape,
                    run=f"run-{night:03d}",
                    night=night,
                    latencies=list(values),
                    compiler="2.22" if upgraded else "2.21",
                )
            )
    return rows


def report_of(rows: list[ReportRow], results_uri: str = "s3://bucket/results") -> Report:
    """The report of these rows as `build_report` makes it, its steps tracked, with no dataset."""
    from kernelsweep.report.load import Selection, latest
    from kernelsweep.report.regress import regressions, track
    from kernelsweep.report.summary import Report

    histories = track(rows)
    return Report(
        results_uri=results_uri,
        selection=Selection(),
        generated_at=datetime.now(UTC),
        latest=latest(rows),
        histories=histories,
        regressions=regressions(histories),
        platforms=["trn2"],
        cross=[],
    )


def without_raw(r: ReportRow) -> ReportRow:
    """The row as schema 1 stored it: the summary, no repeats."""
    return replace(r, latencies_us=None)
