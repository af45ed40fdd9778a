"""The point pool of a flow run: each point's five-task chain on a bounded thread pool, every row
journaled the moment it exists. The sweep and the tunables search (flows/search.py) both measure
through it, so there is one place that decides how many points run at once and what a journal
failure does (flows/README.md says why threads and not `.submit()`).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import partial

from threadpoolctl import threadpool_limits

from kernelsweep.errors import StoreError
from kernelsweep.flows.chain import run_point
from kernelsweep.flows.progress import publish
from kernelsweep.results import Journal, PointRecord, Row, StoredCapture, build_row
from kernelsweep.sweepspec import Point
from kernelsweep.this_host import StageContext

log = logging.getLogger(__name__)
POOL_SLACK = 2  # threads beyond compile slots + cores, so the next point is traced and ready


def measure(
    contexts: Mapping[str, StageContext],
    todo: list[Point],
    run_id: str,
    journal: Journal | None,
    on_row: Callable[[Point, Row], None] | None = None,
) -> tuple[list[Row], StoreError | None]:
    """Each point's task chain on a bounded pool; every row journaled the moment it exists (then handed
    to `on_row`). A journal that cannot be written stops the run (measuring more would be wasted) and is
    returned, not raised."""
    rows: list[Row] = []
    unsaved: StoreError | None = None
    first = next(iter(contexts.values()))
    workers = min(len(todo), first.compile_slots + first.capture_slots + POOL_SLACK)
    # The pool already runs points in parallel: a BLAS thread pool per numpy call (inputs, the
    # reference check) would only spin on the CPUs those points need (~100 ms CPU per MLP point).
    with (
        threadpool_limits(limits=1, user_api="blas"),
        ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="point") as pool,
    ):
        stored = journal.captures(todo) if journal is not None else {}
        on_captured = partial(_journal_capture, journal) if journal is not None else None
        futures = {
            pool.submit(
                contextvars.copy_context().run, run_point, contexts[p.toolchain_name], p, stored.get(p.point_id),
                on_captured,
            ): p
            for p in todo
        }  # fmt: skip
        for future in as_completed(futures):
            record = future.result()
            if record is None:  # stopped before it was measured: left for the resumed run
                continue
            ctx = contexts[futures[future].toolchain_name]
            row = build_row(
                record,
                flow_run_id=run_id,
                toolchain=ctx.toolchain.kind,
                is_simulation=ctx.toolchain.is_simulation,
                versions=ctx.versions,
                host=ctx.host_name,
            )
            if journal is not None:
                try:
                    journal.record(futures[future], row)
                except StoreError as exc:
                    unsaved = unsaved or exc
                    first.stop.set()
                    continue
            rows.append(row)
            if on_row is not None:
                on_row(futures[future], row)
            publish(row.summary())
    return rows, unsaved


def _journal_capture(journal: Journal, record: PointRecord) -> None:
    """The point's capture into the journal before it is extracted, so a retried shard does not take
    the device for it again. Not written, the point is still measured: its row is journaled as ever."""
    assert record.captured is not None
    stored = StoredCapture(record.point.point_id, record.captured, record.task_run_ids.get("capture"))
    try:
        journal.record_capture(stored, record.point)
    except StoreError as exc:
        log.warning("the capture of %s is not journaled (%s); a retry would capture it again", record.point.point_id,
                    exc)  # fmt: skip
