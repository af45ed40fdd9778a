"""The one-host run: a slice of a sweep's points on this host, measured and stored.

The `sweep` flow, its shard subflows, the fleet's shards and the one-kernel run all end here: the
host keeps the points it can run (`host.split`), measures them on a bounded thread pool (flows/points.py)
with each finished row journaled first, runs the searches, pairs baselines and writes one object per
platform. It lives apart from the flows that call it so that the fleet's shard (flows/fleet/shard.py) and
the sweep flow both build on it without importing each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from prefect import get_run_logger
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from kernelsweep.errors import KernelsweepError, StoreError, UsageError
from kernelsweep.fleet.hosts import VERSION_NAMES, unmet
from kernelsweep.flows.points import measure
from kernelsweep.flows.settings import locations_from_env
from kernelsweep.flows.stopping import stoppable
from kernelsweep.flows.ui import lineage_artifact, results_asset_keys, summary_artifact, upstream_asset_keys
from kernelsweep.results import Journal, Row, SweepOutcome, pair
from kernelsweep.stores import probe_location
from kernelsweep.sweepspec import Point, SweepSpec
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.tasks import store_task
from kernelsweep.this_host import StageContext, prepare_toolchains


class SweepInterrupted(KernelsweepError):
    """Stopped before every point ran; the finished ones are in the journal, and `done` says how many."""

    def __init__(self, done: int, total: int, journal_uri: str | None) -> None:
        saved = f"saved in {journal_uri}" if journal_uri else "not saved (this run keeps no journal)"
        super().__init__(
            f"stopped with {done} of {total} points done, {saved}; the same `kernelsweep run` "
            f"reuses them and runs the other {total - done}"
        )
        self.done, self.total = done, total


def run_on_this_host(
    spec: SweepSpec,
    points: list[Point],
    *,
    journal: Journal | None = None,
    run_id: str | None = None,
    reused: Mapping[str, Row] | None = None,
    targets: list[SearchTarget] | None = None,
) -> SweepOutcome:
    """`targets` are the shapes whose tunables a search chooses (kernelsweep.sweepspec.blocks).
    `run_id` is the id the rows and objects carry (default: this flow run's); `journal` None keeps
    no journal (a one-point run), and its locations are probed here (a journal's were, by its sweep).
    `reused` holds the rows of points an interrupted run finished (kernelsweep.results.journal.plan_resume).
    """
    if journal is None:
        probe_locations(spec)
    with stoppable() as stop:
        targets = targets or []
        contexts, notice = prepare_toolchains(spec, [*points, *(t.point for t in targets)], locations_from_env(), stop)
        ctx = next(iter(contexts.values()))
        for each in contexts.values():
            refuse_unpinned(spec, each)
        mine, left = ctx.host.split(points)
        for line in (notice, ctx.host.notice(left, len(points))):
            if line:
                get_run_logger().info(line)
        run_id = run_id or str(flow_run.id)
        run_date = journal.run_date if journal else scheduled_date()
        if mine or targets:
            ids = {p.point_id for p in mine}
            kept = {point_id: row for point_id, row in (reused or {}).items() if point_id in ids}
            report = run_points(
                spec, contexts, mine, run_id=run_id, run_date=run_date, journal=journal, reused=kept, targets=targets
            )
        else:
            report = SweepOutcome(flow_run_id=run_id)
    return dataclasses.replace(report, left_for_other_hosts=dict(left))


def run_points(
    spec: SweepSpec,
    contexts: Mapping[str, StageContext],
    points: list[Point],
    *,
    run_id: str,
    run_date: date,
    journal: Journal | None = None,
    reused: Mapping[str, Row] | None = None,
    targets: Sequence[SearchTarget] = (),
    shared: tuple[str, str] | None = None,
    farm: Callable[[list[Point]], None] | None = None,
) -> SweepOutcome:
    """Measure the points not in `reused` (journaling each row first), each under its toolchain's context,
    run the `targets`' searches (on the `shared` studies, each batch of trials compiled by `farm` first:
    flows/search.py), then store one object per platform."""
    reused = reused or {}
    if reused:
        get_run_logger().info(f"reusing {len(reused)} of {len(points)} points finished before by run {run_id}")
    measured, unsaved = measure(contexts, [p for p in points if p.point_id not in reused], run_id, journal)
    stopped = len(measured) + len(reused) < len(points)
    if targets and unsaved is None and not stopped:
        # here, not at the top: Optuna and the statistics behind a search cost every flow-run process
        # that imports this module about half a CPU second, and most runs search nothing
        from kernelsweep.flows.search import run_searches

        searched, unsaved, stopped = run_searches(spec, contexts, targets, run_id, journal, shared, farm)
        measured += searched
    rows = pair([*reused.values(), *measured])  # each kernel row's speedup over its baseline's row
    if rows:  # in the UI even when the run goes no further: the points it finished, and their artifacts
        lineage_artifact(spec.name, rows)
    where = journal.uri if journal is not None else None
    if unsaved is not None:
        raise StoreError(
            f"{unsaved.message}; {len(rows)} finished points are saved in {where}: once the location works "
            "again, the same `kernelsweep run` reuses them and finishes the rest",
            error_class=unsaved.error_class,
        )
    if stopped:
        raise SweepInterrupted(len(rows), len(points) + sum(t.settings.budget for t in targets), where)
    paths = _store(spec, next(iter(contexts.values())), rows, run_id, run_date, where)
    summaries = [row.summary() for row in rows]
    summary_artifact(spec.name, summaries)
    return SweepOutcome(flow_run_id=run_id, paths=paths, rows=summaries)


def _store(
    spec: SweepSpec, ctx: StageContext, rows: list[Row], run_id: str, run_date: date, journal_uri: str | None
) -> list[str]:
    """One object per platform through the store task (an asset materialization each); a failure says
    where the rows are kept."""
    lineage = {
        "sweep": spec.name,
        "flow_run_id": run_id,
        "toolchain": ctx.toolchain.kind,
        "is_simulation": ctx.toolchain.is_simulation,
        "versions": ctx.versions.as_dict(),
        "points": len(rows),
        "failed": sum(r.status != "ok" for r in rows),
    }
    store = store_task.with_options(
        assets=results_asset_keys(spec.results_location, [r.platform for r in rows], run_date, run_id),
        asset_deps=upstream_asset_keys(spec.artifacts_location),
    )
    quoted: Any = quote(rows)  # no task's result: Prefect would walk every field of every row, twice
    try:
        return store(quoted, spec.results_location, run_id, run_date, lineage)
    except StoreError as exc:
        kept = f"its {len(rows)} rows are saved in {journal_uri}" if journal_uri else "its rows are lost (no journal)"
        raise StoreError(
            f"{exc.message}; {kept}: the same `kernelsweep run` writes them once the location works",
            error_class=exc.error_class,
        ) from exc


def refuse_unpinned(spec: SweepSpec, ctx: StageContext) -> None:
    """A run that pins SDK versions (`require`) measures nothing on a host without them."""
    problems = unmet(spec.require, {name: getattr(ctx.versions, name) for name in VERSION_NAMES})
    if problems:
        raise UsageError(f"this host has {'; '.join(problems)}: run on a host with those versions or change `require`")


def probe_locations(spec: SweepSpec) -> None:
    """A run started from a deployment fails before any point, exactly as the CLI would."""
    probe_location(spec.results_location, "results", "the spec's `results`")
    probe_location(spec.artifacts_location, "artifact store", "the spec's `artifacts`")


def scheduled_date() -> date:
    """The run's scheduled date (UTC): a retry after midnight keeps its objects' keys."""
    scheduled = flow_run.scheduled_start_time or datetime.now(UTC)
    return scheduled.astimezone(UTC).date()
