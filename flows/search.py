"""The sweep's searches: rounds of trials, each trial an ordinary point through the same task chain
(rows, lineage, journal), each round a batch per shape measured in parallel on this host's pool.

A round asks every shape's study for its next batch (kernelsweep.search.study), measures them all at
once, and tells each study its rows as they finish; rounds go on until every shape has used its
budget or its space. The studies live next to the results (kernelsweep.search.storage), so a run
killed mid-search and run again resumes its searches where they were. A fleet run's search shards
(flows/fleet/shard.py) run this same loop on several hosts at once, each on the fleet run's shared
studies under its own `owner`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from prefect import get_run_logger

from kernelsweep.errors import StoreError
from kernelsweep.flows.points import measure
from kernelsweep.results import Journal, Row, run_key
from kernelsweep.search import ShapeSearch, study_storage
from kernelsweep.sweepspec import Point, SweepSpec
from kernelsweep.sweepspec.blocks import SearchTarget, point_check
from kernelsweep.this_host import StageContext
from kernelsweep.tuned.store import TunedStore
from kernelsweep.tuned.warm import seeds


def run_searches(
    spec: SweepSpec,
    contexts: Mapping[str, StageContext],
    targets: Sequence[SearchTarget],
    run_id: str,
    journal: Journal | None,
    shared: tuple[str, str] | None = None,
    farm: Callable[[list[Point]], None] | None = None,
) -> tuple[list[Row], StoreError | None, bool]:
    """(every search row of this run, a journal failure if one stopped it, whether it was stopped).
    `shared` (study id, owner): the studies of that id, shared with other processes, instead of this run's own.
    `farm`: has each batch compiled elsewhere before it is measured (a fleet search shard's compile farm);
    whatever it leaves out of the artifact store, this host compiles."""
    study_id, owner = shared or (run_id, None)
    storage, where = study_storage(spec.results_location, run_key(spec), study_id)
    searches = {t.point.point_id: ShapeSearch.open(t, storage, point_check(spec, t), owner) for t in targets}
    warm_start(spec, searches.values())
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
        if farm is not None:
            farm(batch)
        measured, unsaved = measure(contexts, batch, run_id, journal, on_row=_teller(searches))
        rows += measured
        if unsaved is not None:
            return rows, unsaved, True
        if len(measured) < len(batch):
            return rows, None, True
    return rows, None, first.stop.is_set()


def warm_start(spec: SweepSpec, searches: Iterable[ShapeSearch]) -> None:
    """Fresh studies first try the tuned store's bests near their shapes (kernelsweep.tuned.warm); a
    store that cannot be read leaves them cold, with a warning."""
    wanted = [s for s in searches if s.target.settings.warm_start]
    if not wanted:
        return
    try:
        entries = TunedStore(spec.results_location).entries()
    except StoreError as exc:
        get_run_logger().warning(f"searches start cold: {exc.message}")
        return
    for search in wanted:
        queued = search.seed(seeds(entries, search.target.point, search.target.settings.warm_start))
        if queued:
            get_run_logger().info(f"{search.target.point.point_id}: warm start from {queued} stored configuration(s)")


def _teller(searches: Mapping[str, ShapeSearch]) -> Callable[[Point, Row], None]:
    def tell(point: Point, row: Row) -> None:
        base = point.model_copy(update={"tunables": {}, "search_trial": None}).point_id
        searches[base].record(point, row)

    return tell
