"""The best configuration of each shape, from the rows of its tried configurations (a search's trials
or a grid over tunables), with how many were tried and how sure the win is.

A shape here is a point without its tunables: (kernel, shape, dtype, platform, LNC and toolchain).
Each configuration is its own series; its newest row stands for it. The fastest correct one wins;
its gap to the runner-up is judged by the verdict rule compare uses (stats.effect and decide, the
family correction over every shape judged): a `clear win` when the runner-up is slower beyond the
threshold, a `tie` when their gap lies within it, `inconclusive` when more repeats would tell; `-`
when only one configuration measured. A failed or incorrect configuration never wins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import tomli_w

from kernelsweep.errors import UsageError
from kernelsweep.report import history
from kernelsweep.report.load import ReportRow, latest
from kernelsweep.report.series_query import Results, as_results
from kernelsweep.report.stats import Effect, Rule, decide, effect, interval
from kernelsweep.sweepspec.shapes import natural_order

ShapeKey = tuple[str, str, str, str, str]  # kernel, shape, dtype, platform, variant without tunables
EXPORT_FORMAT = 1
# the verdict on "the runner-up against the best", as a reader of the best table asks it
OUTCOMES = {"slower": "clear win", "same": "tie", "inconclusive": "inconclusive", "faster": "inconclusive"}


@dataclass(frozen=True)
class Best:
    key: ShapeKey
    best: ReportRow
    tried: int  # configurations with a row (their newest), failed or incorrect ones included
    failed: int  # of those, how many did not measure a correct result
    runner_up: ReportRow | None
    gap: Effect | None  # the runner-up against the best: its ratio is runner-up / best
    verdict: str = "-"
    why: str = ""

    @property
    def searched(self) -> bool:
        return self.best.search_trial is not None

    def row(self) -> dict[str, str | int | float | None]:
        return {
            "kernel": self.key[0],
            "shape": self.key[1],
            "dtype": self.key[2],
            "platform": self.key[3],
            "variant": self.key[4] or None,
            "best": self.best.tunables,
            "median_us": round(self.best.latency_us or 0.0, 3),
            "tried": self.tried,
            "failed": self.failed,
            "runner_up": self.runner_up.tunables if self.runner_up else None,
            "gap": interval(self.gap) if self.gap else None,
            "verdict": self.verdict,
            "why": self.why,
            "row_id": self.best.row_id,
        }


def _shape_key(r: ReportRow) -> ShapeKey:
    lnc_toolchain = " ".join(p for p in r.variant.split(" ") if p and p != r.tunables)
    return (r.kernel, r.shape, r.dtype, r.platform, lnc_toolchain)


def best_configurations(results: Results | list[ReportRow], rule: Rule) -> list[Best]:
    """Per shape whose rows carry tunables and at least one measured correctly: its best configuration."""
    source = as_results(results)
    groups: dict[ShapeKey, list[ReportRow]] = {}
    for r in latest(configured(source)):
        groups.setdefault(_shape_key(r), []).append(r)
    spreads = history.Spreads(source, used={r.row_id for rows in groups.values() for r in rows})
    found: list[Best] = []
    gaps: list[tuple[int, Effect]] = []
    for key in sorted(groups, key=natural_order):
        rows = groups[key]
        ranked = sorted((r for r in rows if r.ok), key=lambda r: r.latency_us or 0.0)
        if not ranked:
            continue
        first, second = ranked[0], (ranked[1] if len(ranked) > 1 else None)
        gap = None
        if second is not None:
            gap = effect(
                [first.sample()],
                [second.sample()],
                threshold=rule.threshold_for(first.kernel),
                alpha=rule.alpha,
                spread_a=spreads.of(first.series),
                spread_b=spreads.of(second.series),
            )
            gaps.append((len(found), gap))
        found.append(Best(key, first, len(rows), len(rows) - len(ranked), second, gap))
    for (i, _), (verdict, why, _) in zip(gaps, decide([g for _, g in gaps], rule), strict=True):
        found[i] = replace(found[i], verdict=OUTCOMES[verdict], why=why)
    return found


def configured(results: Results) -> list[ReportRow]:
    """Every row that carries tunables (whole rows, read only for those)."""
    return results.select("tunables", bool)


def progress(results: list[ReportRow]) -> dict[str, dict[str, list[tuple[int, float | None]]]]:
    """Per kernel, per searched shape: (n, latency or None if it failed) of the newest run's n-th measured
    configuration, in the order the search proposed them (pruned and repeated proposals have no row);
    what the progress chart draws."""
    searched = [r for r in results if r.search_trial is not None]
    newest_run: dict[ShapeKey, tuple[Any, str | None]] = {}
    for r in searched:
        key = _shape_key(r)
        if key not in newest_run or r.order > newest_run[key][0]:
            newest_run[key] = (r.order, r.flow_run_id)
    out: dict[str, dict[str, list[tuple[int, float | None]]]] = {}
    for key in sorted(newest_run, key=natural_order):
        trials = sorted(
            (r for r in searched if _shape_key(r) == key and r.flow_run_id == newest_run[key][1]),
            key=lambda r: r.search_trial or 0,
        )
        label = " ".join(p for p in (key[1], key[2], key[3], key[4]) if p)
        out.setdefault(key[0], {})[label] = [(i, r.latency_us if r.ok else None) for i, r in enumerate(trials, 1)]
    return out


def export(best: Sequence[Best], path: Path) -> int:
    """Write the best configurations as a file a kernel author commits: TOML for a `.toml` path, JSON
    otherwise. Written whole or not at all; returns how many configurations it holds."""
    if not best:
        raise UsageError(f"--export-best {path}: no shape in these results has a measured configuration to export")
    entries = [_entry(b) for b in best]
    document = {"format_version": EXPORT_FORMAT, "best": entries}
    text = tomli_w.dumps(document) if path.suffix == ".toml" else json.dumps(document, indent=1) + "\n"
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text)
        partial.replace(path)
    except OSError as exc:
        raise UsageError(f"--export-best {path}: cannot write it ({exc.strerror}); give a writable path") from None
    return len(entries)


def _entry(b: Best) -> dict[str, Any]:
    r = b.best
    entry: dict[str, Any] = {
        "kernel": r.kernel,
        "shape": dict(_numbers(r.shape)),
        "dtype": r.dtype,
        "platform": r.platform,
        "tunables": dict(_numbers(r.tunables or "")),
        "latency_median_us": round(r.latency_us or 0.0, 3),
        "tried": b.tried,
        "verdict": b.verdict,
        "row_id": r.row_id,
        "simulated": r.is_simulation,
    }
    if r.lnc is not None:
        entry["lnc"] = r.lnc
    if r.toolchain_name:
        entry["toolchain"] = r.toolchain_name
    if r.compiler_version:
        entry["compiler_version"] = r.compiler_version
    return entry


def _numbers(text: str) -> list[tuple[str, int | str]]:
    """`tile_m=128,loop_order=mn` as pairs, numbers as integers."""
    pairs: list[tuple[str, int | str]] = []
    for term in filter(None, text.split(",")):
        name, _, value = term.partition("=")
        pairs.append((name, int(value) if value.lstrip("-").isdigit() else value))
    return pairs
