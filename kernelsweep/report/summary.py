"""What a report says, as plain rows: the CLI prints them, the flow publishes them as table
artifacts, and the HTML page renders them. Built once from the dataset by `build_report`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from kernelsweep.report.load import ReportRow, Selection, latest, load
from kernelsweep.report.normalise import CrossRow, cross_platform, normalise
from kernelsweep.report.regress import History, Step, regressions, track
from kernelsweep.report.stats import DEFAULT_ALPHA

Cell = str | int | float | bool | None


@dataclass(frozen=True)
class Report:
    results_uri: str
    selection: Selection
    generated_at: datetime
    latest: list[ReportRow]  # newest row per kernel x shape x dtype x platform
    histories: list[History]
    regressions: list[Step]  # steps that made a series slower, newest first
    platforms: list[str]
    cross: list[CrossRow]

    @property
    def failed(self) -> list[ReportRow]:
        return [r for r in self.latest if not r.ok]

    @property
    def is_simulation(self) -> bool:
        return any(r.is_simulation for r in self.latest)

    @property
    def open_regressions(self) -> list[Step]:
        """Regressions no later step of their series has undone."""
        undone = set()
        for history in self.histories:
            for step in history.steps:
                if any(later.direction == "faster" and later.after.order > step.after.order for later in history.steps):
                    undone.add((step.series, step.after.order))
        return [s for s in self.regressions if (s.series, s.after.order) not in undone]

    def summary_rows(self) -> list[dict[str, Cell]]:
        rows = []
        for r in self.latest:
            n = normalise(r)
            spread = _spread(r)
            rows.append(
                {
                    "kernel": r.kernel,
                    "shape": r.shape,
                    "dtype": r.dtype,
                    "platform": r.platform,
                    "status": r.status,
                    "median_us": _round(r.latency_us if r.ok else None, 3),
                    "min_us": _round(r.latency_min_us if r.ok else None, 3),
                    "max_us": _round(r.latency_max_us if r.ok else None, 3),
                    "spread_percent": _round(None if spread is None else 100 * spread, 2),
                    "repeats": r.repeats,
                    "tflops": _significant(r.achieved_tflops),
                    "mfu_percent": _significant(r.mfu_percent),
                    "roofline_percent": _significant(r.roofline_percent),
                    "hbm_percent": _significant(n.bandwidth_percent),
                    "correct": r.correct,
                    "run_date": r.run_date.isoformat(),
                    "compiler": r.compiler_version,
                }
            )
        return rows

    def failure_rows(self) -> list[dict[str, Cell]]:
        return [
            {
                "kernel": r.kernel,
                "shape": r.shape,
                "dtype": r.dtype,
                "platform": r.platform,
                "stage": r.error_stage,
                "error": r.error_class,
                "message": r.error_message,
                "run_date": r.run_date.isoformat(),
                "flow_run_id": r.flow_run_id,
            }
            for r in self.failed
        ]

    def regression_rows(self) -> list[dict[str, Cell]]:
        return [
            {
                "kernel": s.series[0],
                "shape": s.series[1],
                "dtype": s.series[2],
                "platform": s.series[3],
                "night": s.after.run_date.isoformat(),
                "before_us": _round(s.before.latency_us, 3),
                "after_us": _round(s.after.latency_us, 3),
                "change_percent": _round(100 * s.shift.change, 1),
                "p_value": float(f"{s.shift.p_value:.2g}"),
                "cause": s.cause,
                "flow_run_id": s.after.flow_run_id,
            }
            for s in self.regressions
        ]

    def cross_rows(self) -> list[dict[str, Cell]]:
        """Latency and % of each platform's peak (roofline) side by side, one row per point."""
        out = []
        for row in self.cross:
            cells: dict[str, Cell] = {"kernel": row.kernel, "shape": row.shape, "dtype": row.dtype}
            for platform in self.platforms:
                n = row.by_platform.get(platform)
                ok = n is not None and n.result.ok
                cells[f"{platform} us"] = _round(n.result.latency_us, 3) if n and ok else None
                cells[f"{platform} % peak"] = _significant(n.roofline_percent) if n and ok else None
            cells["fastest"] = row.fastest()
            out.append(cells)
        return out


def build_report(results_uri: str, selection: Selection | None = None, alpha: float = DEFAULT_ALPHA) -> Report:
    selection = selection or Selection()
    results = load(results_uri, selection)
    newest = latest(results)
    histories = track(results, alpha)
    platforms, cross = cross_platform(newest)
    return Report(
        results_uri=results_uri,
        selection=selection,
        generated_at=datetime.now(UTC),
        latest=newest,
        histories=histories,
        regressions=regressions(histories),
        platforms=platforms,
        cross=cross,
    )


def _spread(r: ReportRow) -> float | None:
    """The repeats' range relative to their median."""
    low, high, median = r.latency_min_us, r.latency_max_us, r.latency_us
    if not r.ok or low is None or high is None or not median:
        return None
    return (high - low) / median


def _significant(value: float | None, digits: int = 3) -> float | None:
    """Rates span six orders of magnitude (a vector add's TFLOPS next to a matmul's)."""
    return None if value is None else float(f"{value:.{digits}g}")


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
