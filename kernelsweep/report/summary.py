"""What a report says, as plain rows: the CLI prints them, the flow publishes them as table
artifacts, and the HTML page renders them. Built once from the dataset by `build_report`."""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time

from kernelsweep.errors import KernelsweepError
from kernelsweep.report.acknowledge import Acknowledgement
from kernelsweep.report.best import Best, best_configurations, configured, progress
from kernelsweep.report.index import Indexed
from kernelsweep.report.load import ReportRow, Selection
from kernelsweep.report.matrix import matrix_rows
from kernelsweep.report.normalise import CrossRow, cross_platform, normalise
from kernelsweep.report.ranks import median_interval
from kernelsweep.report.regress import History, Step, drifts, regressions, track
from kernelsweep.report.speedup import Speedup, speedups
from kernelsweep.report.stats import Rule
from kernelsweep.report.triage import ACKNOWLEDGED, Status, Statuses
from kernelsweep.report.triage import load as load_triage
from kernelsweep.tuned.changes import StoreChange, store_changes
from kernelsweep.tuned.store import TunedStore

Cell = str | int | float | bool | None
SHORT_RUNS = 4  # a lone series' step needs about 3 runs before it (the second review: 0/10 with 2, 4/10 with 3)
MEDIAN_CONFIDENCE = 0.95  # the latest-results table's interval of each median (order statistics)
log = logging.getLogger(__name__)


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
    rule: Rule = Rule()
    triage: Statuses = field(
        default_factory=Statuses
    )  # what people decided: acknowledged or fixed (kernelsweep.report.triage)
    best: list[Best] = field(default_factory=list)  # per shape with tunables: its fastest configuration
    search_progress: dict[str, dict[str, list[tuple[int, float | None]]]] = field(default_factory=dict)
    matrix: list[dict[str, Cell]] = field(default_factory=list)  # kernel x toolchain x LNC
    speedups: list[Speedup] = field(default_factory=list)  # each kernel against its baseline (schema 3)
    drifts: list[Step] = field(default_factory=list)  # the newest runs against the selection's first (regress.drifts)
    tuned_changes: list[StoreChange] = field(default_factory=list)  # bests the tuned store replaced, newest first

    @property
    def failed(self) -> list[ReportRow]:
        return [r for r in self.latest if not r.ok and not r.incorrect]

    @property
    def incorrect(self) -> list[ReportRow]:
        """Series whose latest row measured a wrong output."""
        return [r for r in self.latest if r.incorrect]

    @property
    def is_simulation(self) -> bool:
        return any(r.is_simulation for r in self.latest)

    @property
    def steps_tested(self) -> int:
        return sum(h.tested for h in self.histories)

    @property
    def method(self) -> str:
        """How the steps were judged, in words: the rule and what its correction counted."""
        return self.rule.describe(self.steps_tested, "place(s) a step could be")

    @property
    def open_regressions(self) -> list[Step]:
        """Regressions no later step of their series has undone and nobody has acknowledged or marked
        fixed: they stay open in every report, whatever their age, until one of those happens."""
        return [s for s in self.regressions if self.state(s) == "open"]

    @property
    def open_drifts(self) -> list[Step]:
        return [s for s in self.drifts if self.status(s) is None]

    @property
    def short_series(self) -> int:
        """Series with too few runs for a step on them to be judged (with one run after it)."""
        return sum(len(h.runs) < SHORT_RUNS for h in self.histories)

    @property
    def lasting(self) -> list[Step]:
        """Regressions that lasted more than one run, whatever their state: the regression table's rows."""
        return [s for s in self.regressions if self.state(s) != "blip"]

    @property
    def blips(self) -> list[Step]:
        """Regressions the very next run undid: one night's excursion, shown apart from the others."""
        return [s for s in self.regressions if self.state(s) == "blip"]

    def recovery(self, step: Step) -> Step | None:
        """The first later step of the series that made it faster again: where the regression ended."""
        later = [s for h in self.histories if h.series == step.series for s in h.steps
                 if s.direction == "faster" and s.first_after.order > step.first_after.order]  # fmt: skip
        return min(later, key=lambda s: s.first_after.order) if later else None

    def status(self, step: Step) -> Status | None:
        """The people's decision that holds for a regression or drift (acknowledged, fixed), if any."""
        return self.triage.of(step, drift=any(step is d for d in self.drifts))

    def state(self, step: Step) -> str:
        """acknowledged or fixed (a person's status), else blip (undone by the next run), recovered
        (undone later), or open."""
        decided = self.status(step)
        if decided is not None:
            return decided.status
        if self.recovery(step) is None:
            return "open"
        return "blip" if len(step.after) == 1 else "recovered"

    @property
    def has_variants(self) -> bool:
        """Whether the series differ in LNC, tunables or toolchain: then tables show the variant."""
        return len({r.variant for r in self.latest}) > 1

    def _variant(self, variant: str) -> dict[str, Cell]:
        return {"variant": variant} if self.has_variants else {}

    def summary_rows(self) -> list[dict[str, Cell]]:
        rows = []
        for r in self.latest:
            n = normalise(r)
            low, high = _median_interval(r)
            rows.append(
                {
                    "kernel": r.kernel,
                    "shape": r.shape,
                    **self._variant(r.variant),
                    "dtype": r.dtype,
                    "platform": r.platform,
                    "status": r.status,
                    "median_us": _round(r.latency_us if r.ok else None, 3),
                    "median_low_us": _round(low, 3),
                    "median_high_us": _round(high, 3),
                    "repeats": r.repeats,
                    "tflops": _significant(r.achieved_tflops),
                    "mfu_percent": _significant(r.mfu_percent),
                    "roofline_percent": _significant(r.roofline_percent),
                    "hbm_percent": _significant(n.bandwidth_percent),
                    "correct": r.correct,
                    "run_date": r.run_date.isoformat(),
                    "compiler": r.compiler_version,
                    "bound": r.bound_engine,
                    "why": r.bound_why,
                }
            )
        return rows

    def speedup_rows(self) -> list[dict[str, Cell]]:
        """Each kernel against its baseline per shape: baseline / kernel, its interval, the verdict."""
        return [
            {
                "kernel": s.kernel,
                "baseline": s.baseline_ref or s.baseline,
                "shape": s.shape,
                "dtype": s.dtype,
                "platform": s.platform,
                "kernel_us": _round(s.kernel_us, 3),
                "baseline_us": _round(s.baseline_us, 3),
                "speedup": _round(s.speedup, 3),
                "speedup_low": _round(s.low, 3),
                "speedup_high": _round(s.high, 3),
                "verdict": s.verdict,
                "why": s.why,
            }
            for s in self.speedups
        ]

    def failure_rows(self) -> list[dict[str, Cell]]:
        return [
            {
                "kernel": r.kernel,
                "shape": r.shape,
                **self._variant(r.variant),
                "dtype": r.dtype,
                "platform": r.platform,
                "status": r.status,
                "stage": r.error_stage,
                "error": r.error_class,
                "message": r.error_message,
                "run_date": r.run_date.isoformat(),
                "flow_run_id": r.flow_run_id,
            }
            for r in self.failed + self.incorrect
        ]

    def regression_rows(self, steps: list[Step] | None = None) -> list[dict[str, Cell]]:
        """One row per step: each window's level (geometric mean of its runs' medians), whose ratio
        is the change shown, its interval, and the p-value after the family correction."""
        return [
            {
                "kernel": s.series[0],
                "shape": s.series[1],
                **self._variant(s.series[4]),
                "dtype": s.series[2],
                "platform": s.series[3],
                "night": s.first_after.run_date.isoformat(),
                "before_us": _round(_level(s.before), 3),
                "after_us": _round(_level(s.after), 3),
                "runs": f"{len(s.before)} v {len(s.after)}",
                "change_percent": _round(100 * s.effect.change, 1),
                "ci_low_percent": _round(100 * (s.effect.low - 1), 1),
                "ci_high_percent": _round(100 * (s.effect.high - 1), 1),
                "p_adjusted": float(f"{s.adjusted_p:.2g}"),
                "cause": s.cause,
                "state": self.state(s),
                "age_nights": (self._newest - s.first_after.run_date).days,
                "recovered_on": self._recovered_on(s),
                **self._triage_cells(self.status(s)),
                "flow_run_id": (s.first_after.flow_run_id or "")[:8] or None,
            }
            for s in (self.regressions if steps is None else steps)
        ]

    @staticmethod
    def _triage_cells(decided: Status | None) -> dict[str, Cell]:
        """The status's reason, link, fixing change, who and when (`acknowledged`: the reason again, as
        format 1's readers expect it)."""
        if decided is None:
            return dict.fromkeys(("acknowledged", "reason", "link", "fixed_by", "triaged_by", "triaged_at"))
        return {
            "acknowledged": decided.reason if decided.status == ACKNOWLEDGED else None,
            "reason": decided.reason,
            "link": decided.link,
            "fixed_by": decided.fixed_by,
            "triaged_by": decided.by,
            "triaged_at": decided.at,
        }

    def _recovered_on(self, step: Step) -> str | None:
        back = self.recovery(step)
        return back.first_after.run_date.isoformat() if back else None

    @property
    def _newest(self) -> date:
        return max((r.run_date for r in self.latest), default=date.min)

    def best_rows(self) -> list[dict[str, Cell]]:
        """The best configuration per shape, how many were tried, and the runner-up's gap with its verdict."""
        rows = [b.row() for b in self.best]
        if not any(r["variant"] for r in rows):
            rows = [{k: v for k, v in r.items() if k != "variant"} for r in rows]
        return rows

    def tuned_rows(self) -> list[dict[str, Cell]]:
        """The tuned store's replaced bests: key, SDK, was -> now, when, and the verdict with its reasons."""
        return [c.row() for c in self.tuned_changes]

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

    def exit_code(self, allow_incorrect: bool = False) -> int:
        """1 while any series' latest run failed, computed a wrong output, has an open regression or drifted."""
        problems = self.failed or self.open_regressions or self.open_drifts or (self.incorrect and not allow_incorrect)
        return 1 if problems else 0


def build_report(
    results_uri: str,
    selection: Selection | None = None,
    rule: Rule | None = None,
    acknowledged: list[Acknowledgement] | None = None,
) -> Report:
    """The report of `results_uri` within `selection`; the statuses people set are read from the results'
    triage file, with `acknowledged` (an --acknowledged file's entries) beside them."""
    selection, rule = selection or Selection(), rule or Rule()
    results = Indexed(results_uri, selection)  # a few columns of every row; whole rows only where shown
    newest = results.latest()
    histories = track(results, rule)
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
        rule=rule,
        triage=load_triage(results_uri, acknowledged or ()),
        best=best_configurations(results, rule),
        search_progress=progress(configured(results)),
        matrix=matrix_rows(newest),
        speedups=speedups(results, rule),
        drifts=drifts(histories, rule),
        tuned_changes=_tuned_changes(results_uri, selection),
    )


def _tuned_changes(results_uri: str, selection: Selection) -> list[StoreChange]:
    """The bests the tuned store beside the results replaced, within the selection's kernels, platforms,
    dtypes and dates; none, with a warning, when the store cannot be read (the report stands without)."""
    try:
        entries = TunedStore(results_uri).entries()
    except KernelsweepError as exc:
        log.warning("the tuned store's changes are left out of the report: %s", exc.message)
        return []
    for name, wanted in (("kernel", selection.kernels), ("platform", selection.platforms), ("dtype", selection.dtypes)):
        entries = [e for e in entries if not wanted or e["key"][name] in wanted]
    since = selection.first_date()
    return store_changes(entries, datetime.combine(since, time(), UTC) if since else None)


def _level(rows: list[ReportRow]) -> float:
    return math.exp(statistics.fmean(r.sample().level for r in rows))


def _median_interval(r: ReportRow) -> tuple[float | None, float | None]:
    if not r.ok or not r.latencies_us:
        return None, None
    return median_interval(r.latencies_us, MEDIAN_CONFIDENCE)


def _significant(value: float | None, digits: int = 3) -> float | None:
    """Rates span six orders of magnitude (a vector add's TFLOPS next to a matmul's)."""
    return None if value is None else float(f"{value:.{digits}g}")


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
