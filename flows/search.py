"""The sweep's searches: rounds of trials, each trial an ordinary point through the same task chain
(rows, lineage, journal), each round a batch per shape measured in parallel on this host's pool.

A round asks every shape's study for its next batch (kernelsweep.search.study), measures them all at
once, and tells each study its rows as they finish; rounds go on until every shape has used its
budget or its space. The studies live next to the results (kernelsweep.search.storage), so a run
killed mid-search and run again resumes its searches where they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from prefect import get_run_logger

from kernelsweep.errors import StoreError
from kernelsweep.flows.points import measure
from kernelsweep.results.journal import Journal, run_key
from kernelsweep.results.rows import Row
from kernelsweep.search.storage import study_storage
from kernelsweep.search.study import ShapeSearch
from kernelsweep.sweepspec.blocks import SearchTarget, point_check
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext


def run_searches(
    spec: SweepSpec,
    contexts: Mapping[str, StageContext],
    targets: Sequence[SearchTarget],
    run_id: str,
    journal: Journal | None,
) -> tuple[list[Row], StoreError | None, bool]:
    """(every search row of this run, a journal failure if one stopped it, whether it was stopped)."""

    storage, where = study_storage(spec.results_location, run_key(spec), run_id)
    searches = {t.point.point_id: ShapeSearch.open(t, storage, point_check(spec, t)) for t in targets}
    rows: list[Row] = []
    recorded = journal.rows() if journal is not None else []
    for search in searches.values():
        rows += search.resume(journal.completed if journal is not None else lambda _: {}, recorded)
    first = next(iter(contexts.values()))
    get_run_logger().info(f"searching {len(searches)} shape(s); studies in {where}")
    while not first.stop.is_set():
        batch = [p for s in searches.values() for p in s.propose(s.target.settings.batch or first.compile_slots)]
        if not batch:
            break
        measured, unsaved = measure(contexts, batch, run_id, journal, on_row=_teller(searches))
        rows += measured
        if unsaved is not None:
            return rows, unsaved, True
        if len(measured) < len(batch):
            return rows, None, True
    return rows, None, first.stop.is_set()


def _teller(searches: Mapping[str, ShapeSearch]) -> Callable[[Point, Row], None]:
    def tell(point: Point, row: Row) -> None:
        base = point.model_copy(update={"tunables": {}, "search_trial": None}).point_id
        searches[base].record(point, row)

    return tell
