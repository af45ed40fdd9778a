"""Regression tracking over nightly histories: false steps and real steps found by `report`'s
change-point tracking (kernelsweep.report.regress.track), under run-level noise; with --scan, the
hand-written alternative (every place tested, a full window each side) under the same rule.

Synthetic histories through the real code, drawn like the simulator: S series x N nights, each night
a run of R repeats with a 1% per-repeat jitter and a per-point run shift of the given standard
deviation; optionally a real step (+change, with a compiler version change) on K series at night T.
"report red" = the report would exit 1 on an open regression no real change explains.

    python benchmarks/steps.py [--histories 3] [--scan]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import numpy as np

from kernelsweep.report.load import ReportRow
from kernelsweep.report.regress import drifts, regressions, track

JITTER = 0.01
TEMPLATE = ReportRow(
    row_id="",
    sweep="s",
    kernel="k",
    shape="",
    dtype="bfloat16",
    platform="trn2",
    lnc=2,
    status="ok",
    error_stage=None,
    error_class=None,
    error_message=None,
    is_simulation=True,
    repeats=0,
    latency_median_us=None,
    latency_min_us=None,
    latency_max_us=None,
    latency_p90_us=None,
    latency_p99_us=None,
    latencies_us=None,
    total_time_us=None,
    achieved_tflops=None,
    mfu_percent=None,
    roofline_percent=None,
    roofline_us=None,
    roofline_bound=None,
    cost_flops=None,
    cost_hbm_bytes=None,
    correct=True,
    compiler_version="2.21",
    runtime_version="r",
    profiler_version="p",
    nki_version="0.6",
    kernel_source_sha256="k",
    instance_type="trn2.sim",
    flow_run_id=None,
    started_at=None,
    run_date=date(2026, 1, 1),
)


def history(
    rng: np.random.Generator,
    series: int,
    nights: int,
    repeats: int,
    run_sd: float,
    k: int,
    at: int | None,
    change: float,
    lineage: bool = True,
) -> list[ReportRow]:
    """Rows of `series` x `nights`; from night `at` the first `k` series are `change` slower, with a
    compiler version change unless `lineage` is False (another host, firmware: nothing recorded)."""
    rows = []
    for t in range(nights):
        stepped = at is not None and t >= at
        for s in range(series):
            factor = 1 + change if stepped and s < k else 1.0
            x = (
                100
                * (1 + s % 7)
                * factor
                * (1 + run_sd * rng.standard_normal())
                * (1 + JITTER * rng.standard_normal(repeats))
            )
            rows.append(
                replace(
                    TEMPLATE,
                    row_id=f"{t}-{s}",
                    shape=f"s={s}",
                    repeats=repeats,
                    latency_median_us=float(np.median(x)),
                    latency_min_us=float(x.min()),
                    latency_max_us=float(x.max()),
                    latencies_us=x.tolist(),
                    compiler_version="2.22" if stepped and lineage else "2.21",
                    flow_run_id=f"run-{t}",
                    started_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=t),
                    run_date=date(2026, 1, 1) + timedelta(days=t),
                )
            )
    return rows


def study(
    histories: int,
    series: int,
    nights: int,
    repeats: int,
    run_sd: float,
    k: int = 0,
    at: int | None = None,
    change: float = 0.0,
    scan: bool = False,
) -> str:
    rng = np.random.default_rng(int(1000 * run_sd) + k + int(100 * change) + repeats)
    false_steps = red = found = on_night = 0
    for _ in range(histories):
        hs = track(history(rng, series, nights, repeats, run_sd, k, at, change), scan=scan)
        false = [s for h in hs for s in h.steps if int(h.series[1][2:]) >= k]
        false_steps += len(false)
        red += any(int(s.series[1][2:]) >= k for s in regressions(hs))
        for h in hs[:k] if k else []:
            hit = [s for s in h.steps if s.direction == "slower"]
            found += bool(hit)
            on_night += any(s.first_after.run_date == date(2026, 1, 1) + timedelta(days=at or 0) for s in hit)
    real = f"{found} / {k * histories} ({on_night} on the night)" if k else "-"
    step = f"{k} at +{change:.0%}" if k else "none"
    cells = [
        f"{series} x {nights}",
        repeats,
        f"{run_sd:.1%}",
        step,
        histories,
        false_steps,
        f"{red} / {histories}",
        real,
    ]
    return "| " + " | ".join(map(str, cells)) + " |"


def persistence(histories: int, run_sd: float, change: float, series: int = 32, before: int = 20) -> str:
    """Series (of `series`, every one stepped with no lineage change) still flagged slower T nights
    after the step, for T = 0, 7, 14, 20, 30: a step must stay until someone acts."""
    rng = np.random.default_rng(int(1000 * run_sd) + int(100 * change))
    after = (0, 7, 14, 20, 30)
    flagged = dict.fromkeys(after, 0)
    for _ in range(histories):
        rows = history(rng, series, before + max(after) + 1, 7, run_sd, series, before, change, lineage=False)
        for t in after:
            shown = [r for r in rows if r.run_date <= date(2026, 1, 1) + timedelta(days=before + t)]
            flagged[t] += len({s.series for s in regressions(track(shown))})
    cells = [f"+{change:.0%}", f"{run_sd:.1%}", *(f"{flagged[t]} / {series * histories}" for t in after)]
    return "| " + " | ".join(cells) + " |"


def drift(histories: int, run_sd: float, total: float, series: int = 32, before: int = 20, nights: int = 20) -> str:
    """Series (of `series`, each drifting to +`total` over `nights` after `before` flat nights, no lineage
    change) flagged (a step or the drift against the selection's first runs) on the drift's last night."""
    rng = np.random.default_rng(int(1000 * run_sd) + 7)
    flagged = 0
    for _ in range(histories):
        rows = history(rng, series, before + nights, 7, run_sd, 0, None, 0.0)
        ramped = [_ramped(r, before, total / nights) for r in rows]
        hs = track(ramped)
        flagged += len({s.series for s in regressions(hs)} | {s.series for s in drifts(hs)})
    return f"| +{total:.0%} over {nights} nights | {run_sd:.1%} | {flagged} / {series * histories} |"


def _ramped(r: ReportRow, before: int, per_night: float) -> ReportRow:
    night = (r.run_date - date(2026, 1, 1)).days
    factor = 1 + per_night * max(0, night - before + 1)
    values = [v * factor for v in r.latencies_us or []]
    return replace(r, latencies_us=values, latency_median_us=float(np.median(values)), latency_min_us=min(values),
                   latency_max_us=max(values))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=3)
    parser.add_argument("--scan", action="store_true", help="test every place instead of PELT's change points")
    args = parser.parse_args()
    scan = args.scan  # the same rule and correction, every place a candidate
    n = args.histories
    started = time.perf_counter()
    columns = ["series x nights", "repeats", "run-level sd", "real step", "histories", "false steps"]
    print("| " + " | ".join([*columns, "reports red falsely", "real steps found"]) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for run_sd in (0.0, 0.005, 0.01, 0.02):
        print(study(n, 100, 30, 7, run_sd, scan=scan), flush=True)
    for change in (0.03, 0.05, 0.10):
        for run_sd in (0.0, 0.01):
            print(study(n, 50, 25, 7, run_sd, k=10, at=20, change=change, scan=scan), flush=True)
    print("\nA step with no lineage change, every series: series still flagged slower T nights after it")
    print("| step | run-level sd | T+0 | T+7 | T+14 | T+20 | T+30 |")
    print("|---|---|---|---|---|---|---|")
    for run_sd in (0.005, 0.01):
        print(persistence(n, run_sd, 0.10), flush=True)
    print("\nA slow drift, every series, no lineage change: series flagged on its last night")
    print("| drift | run-level sd | flagged |")
    print("|---|---|---|")
    for run_sd in (0.005, 0.01):
        print(drift(n, run_sd, 0.10), flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
