"""A run's journal: each point's row, durable the moment the point finishes, next to the results.

A sweep's Parquet objects are written once, when every point is done. Until then its rows live
here, one small object per point, so a run stopped by Ctrl-C, SIGTERM, SIGKILL, a dead S3 endpoint
or a full disk loses nothing it measured: `kernelsweep run` on the same spec finds the journal,
reuses every point that finished ok, measures the rest and writes the objects from both.

    <results>/_journal/<run key>/<run id>/run.json          which run this is (id, date, shard ids)
    <results>/_journal/<run key>/<run id>/points/<p>.json   one finished point's row

The run key names the spec (its name and a hash of its content), so only a run of the same spec
is resumed. The leading underscore and the place outside `v1/` keep the journal out of every
reader's sight (pyarrow, Athena and Glue skip `_` names). A resumed run finishes under the
interrupted run's id and date: its rows keep their `row_id`s and its objects their keys.

Nothing in a journal is trusted (kernelsweep.results.journal_check): a bad entry is a point to
measure again, a header of another format is refused with what to do, and the journal of a run that
finished or was abandoned is removed by the next run of its spec. A live run holds a lease on its
journal and `kernelsweep run` one on its spec (kernelsweep.results.journal_lease), so a run that is
still going is never resumed by another.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from datetime import date, datetime
from typing import Any

from kernelsweep.errors import UsageError
from kernelsweep.names import slug
from kernelsweep.results import journal_lease as lease
from kernelsweep.results.captures import StoredCapture, decode_capture, encode_capture
from kernelsweep.results.journal_check import FORMAT_VERSION, BadJournalObject, RunHeader, check_entry
from kernelsweep.results.journal_files import JournalFiles, open_files
from kernelsweep.results.journal_scan import HEADER, find_unfinished
from kernelsweep.results.rows import Row, row_id
from kernelsweep.stores.locations import Location
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point

READ_THREADS = 16
_POINT_NAMESPACE = uuid.UUID("0c6f3d52-2b8e-4f51-9d4e-5a1f7e0b9c13")
_TIMES = ("started_at", "finished_at")

log = logging.getLogger(__name__)


def run_key(spec: SweepSpec, scope: str = "sweep") -> str:
    """`<name>-<hash>`: the same spec (after command-line overrides) always gets the same key.

    `compile_slots` is left out: it changes how fast a host works, not what a run measures.
    """
    content = spec.model_dump(mode="json", exclude={"execution": {"compile_slots"}})
    digest = hashlib.sha256(json.dumps([scope, content], sort_keys=True).encode()).hexdigest()[:16]
    name = slug(spec.name)[:64].rstrip("-") or "sweep"
    return f"{name}-{digest}"


def encode_row(row: Row) -> bytes:
    """Exact: `decode_row(encode_row(row)) == row`, so an object assembled from the journal has the
    very bytes one assembled from memory would (floats round-trip through JSON's repr)."""
    doc: dict[str, Any] = {f.name: getattr(row, f.name) for f in fields(Row)}
    doc["metrics"] = dict(row.metrics)
    for name in _TIMES:
        doc[name] = doc[name].isoformat() if doc[name] is not None else None
    return json.dumps({"format": FORMAT_VERSION, "row": doc}).encode()


def decode_row(data: bytes) -> Row:
    """The row of an entry, every field checked for its type; BadJournalObject when it is not one."""
    return check_entry(data)


def entry_name(point: Point) -> str:
    """A point's entry: a UUID of its id, so any point id (however long) makes a short, safe name."""
    return f"{uuid.uuid5(_POINT_NAMESPACE, point.point_id)}.json"


class Journal:
    """One run's journal. `record` is called from the flow's thread as each point finishes."""

    def __init__(
        self, files: JournalFiles, header: RunHeader, lease_uri: str | None = None, *, reuse_captures: bool = True
    ) -> None:
        self.files, self.header = files, header
        self.base = f"{header.run_key}/{header.run_id}"
        self.lease_uri = lease_uri  # the run's lease this journal holds (released by `release`)
        self.reuse_captures = reuse_captures  # False under `--remeasure`: every point is captured again

    @property
    def run_id(self) -> str:
        return self.header.run_id

    @property
    def run_date(self) -> date:
        return self.header.run_date

    @property
    def uri(self) -> str:
        return self.files.uri(self.base)

    def record(self, point: Point, row: Row) -> None:
        """Durable on return (fsync'd file, or a completed PutObject)."""
        self.files.put(f"{self.base}/points/{entry_name(point)}", encode_row(row))

    def record_capture(self, stored: StoredCapture, point: Point) -> None:
        """The point's capture, durable on return: a retried shard extracts from it (results.captures)."""
        self.files.put(f"{self.base}/captures/{entry_name(point)}", encode_capture(stored))

    def captures(self, points: Iterable[Point]) -> dict[str, StoredCapture]:
        """point_id -> its journaled capture, for each of `points` that has one that reads back (none when
        the run measures everything again)."""
        found: dict[str, StoredCapture] = {}
        if not self.reuse_captures:
            return found
        for name, point, blob in self._entries("captures", points):
            try:
                found[point.point_id] = decode_capture(blob, point.point_id)
            except BadJournalObject as exc:
                log.warning("journal capture %s is not usable (%s); point %s is captured again",
                            self.files.uri(name), exc, point.point_id)  # fmt: skip
        return found

    def completed(self, points: Iterable[Point]) -> dict[str, Row]:
        """point_id -> row, for each of `points` whose journaled row is ok (failed points run again).

        An entry that cannot be read back, or is not the row this run would have written for its
        point (another point's, another run's, a `row_id` that is not the one its run and point give),
        is no measurement: one warning names its file, and its point runs again.
        """
        rows: dict[str, Row] = {}
        for name, point, blob in self._entries("points", points):
            try:
                row = self._entry_row(blob, point)
            except BadJournalObject as exc:
                log.warning("journal entry %s is not usable (%s); point %s runs again", self.files.uri(name), exc,
                            point.point_id)  # fmt: skip
                continue
            if row.status == "ok":
                rows[point.point_id] = row
        return rows

    def _entries(self, folder: str, points: Iterable[Point]) -> list[tuple[str, Point, bytes]]:
        """(file, point, its bytes) of each of `points` with an entry in the run's `folder`."""
        wanted = {entry_name(p): p for p in points}
        present = [n for n in self.files.list(f"{self.base}/{folder}/") if n.rsplit("/", 1)[-1] in wanted]
        with ThreadPoolExecutor(READ_THREADS) as pool:
            blobs = list(pool.map(self.files.get, present))
        return [(n, wanted[n.rsplit("/", 1)[-1]], b or b"") for n, b in zip(present, blobs, strict=True)]

    def rows(self) -> list[Row]:
        """Every entry that reads as a row of this run, unchecked against a point: for a search that
        finds its points among them (then checked through `completed`); the rest are left unsaid."""
        names = self.files.list(f"{self.base}/points/")
        with ThreadPoolExecutor(READ_THREADS) as pool:
            blobs = list(pool.map(self.files.get, names))
        rows = []
        for blob in blobs:
            try:
                row = decode_row(blob or b"")
            except BadJournalObject:
                continue
            if row.flow_run_id in self.identities():
                rows.append(row)
        return rows

    def _entry_row(self, blob: bytes, point: Point) -> Row:
        row = decode_row(blob)
        identity = (row.sweep, row.kernel, row.kernel_ref, row.shape, row.dtype, row.platform, row.lnc,
                    row.tunables or "")  # fmt: skip
        if identity != (point.sweep, point.kernel, point.kernel_ref, point.shape, point.dtype, point.platform,
                        point.lnc, point.tunables_text):  # fmt: skip
            raise BadJournalObject("it holds another point's row")
        if row.flow_run_id not in self.identities():
            raise BadJournalObject(f"it holds a row of run {row.flow_run_id}, not of this run")
        if row.row_id != row_id(row.flow_run_id, point):
            raise BadJournalObject(f"its row_id {row.row_id} is not the one run {row.flow_run_id} gives this point")
        return row

    def identities(self) -> set[str]:
        return {self.header.run_id, *self.header.shards.values()}

    def shard_run_id(self, shard: int, flow_run_id: str) -> str:
        """The id shard `shard` finishes under: the one it first ran under, or `flow_run_id` (recorded)."""
        known = self.header.shards.get(str(shard))
        if known:
            return known
        header = replace(self.header, shards={**self.header.shards, str(shard): flow_run_id})
        self.files.put(f"{self.base}/{HEADER}", header.to_json())
        self.header = header
        return flow_run_id

    def close(self) -> None:
        """After the objects are written. The header goes first: a journal without one is never resumed,
        so a close interrupted half-way cannot bring back a run with some of its entries gone (what is
        left is removed by the next run of the spec)."""
        self.files.delete([f"{self.base}/{HEADER}"])
        self.files.delete(self.files.list(f"{self.base}/"))
        self.release()

    def release(self) -> None:
        """Let go of the run's lease (once; the journal stays for a resume)."""
        if self.lease_uri is not None:
            lease.release(self.lease_uri)
            self.lease_uri = None


@dataclass(frozen=True)
class ResumePlan:
    """What a run of a spec does about earlier work, decided in one place (`plan_resume`) for the CLI's
    message, the sweep flow and each of its shards: finish `resumed` (an interrupted run of the very
    same spec) reusing `reused`, or start afresh when `resumed` is None."""

    run_key: str
    resumed: RunHeader | None
    reused: dict[str, Row]  # point_id -> its journaled row, reused as it is
    lease: str | None = None  # the resumed run's lease, held for `begin` to take over
    remeasure: bool = False  # measure every point again: its journaled captures are not extracted either

    def todo(self, points: Iterable[Point]) -> list[Point]:
        return [p for p in points if p.point_id not in self.reused]


def plan_resume(
    results: Location | str,
    key: str,
    points: Iterable[Point],
    *,
    run_id: str | None = None,
    find: bool = False,
    remeasure: bool = False,
) -> ResumePlan:
    """The plan for `points`: finish run `run_id` (UsageError when it has no journal), or with `find`
    the newest unfinished run of this spec if there is one; its points that finished ok are reused
    unless `remeasure`. Neither given: a fresh start.

    `find` (`kernelsweep run`) holds the spec's lease for the rest of the process: a second run of the
    spec is refused (RunIsLive) while this one lives. A run to finish is leased before its journal
    is read: a live run's journal is never adopted. With `find` and `remeasure`, a journal of another
    format is removed instead of refused (journal_scan)."""
    files = open_files(results)
    header = None
    if run_id is not None:
        header = _open_header(files, key, run_id)
    elif find:
        lease.acquire(*lease.open_lease(results, key), "a `kernelsweep run` of this spec")
        header = find_unfinished(results, key, start_over=remeasure)
    if header is None:
        return ResumePlan(key, None, {})
    held = _hold_run(results, key, header.run_id)
    reused = {} if remeasure else Journal(files, header).completed(points)
    return ResumePlan(key, header, reused, held, remeasure)


def begin(
    results: Location | str, plan: ResumePlan, run_id: str, run_date: date, sweep: str, started_at: datetime
) -> Journal:
    """The journal the run writes to, leased to it: the resumed run's own, or a new one under `run_id`
    and `run_date`. Call `Journal.release` (or `close`) when the run ends."""
    files = open_files(results)
    if plan.resumed is not None:
        held = plan.lease or _hold_run(results, plan.run_key, plan.resumed.run_id)
        return Journal(files, plan.resumed, held, reuse_captures=not plan.remeasure)
    held = _hold_run(results, plan.run_key, run_id)  # before the header: a half-made journal is never cleaned
    header = RunHeader(
        run_key=plan.run_key, run_id=run_id, run_date=run_date, sweep=sweep, started_at=started_at.isoformat()
    )
    files.put(f"{plan.run_key}/{run_id}/{HEADER}", header.to_json())
    return Journal(files, header, held)


def _hold_run(results: Location | str, key: str, run_id: str) -> str:
    uri, run_lease = lease.open_lease(results, key, run_id)
    lease.acquire(uri, run_lease, f"run {run_id}")
    return uri


def open_run(results: Location | str, key: str, run_id: str) -> Journal:
    """The journal of an interrupted run (unleased: to read); UsageError when there is none. For tests: the
    CLI and the flows reach a journal through `plan_resume`."""
    files = open_files(results)
    return Journal(files, _open_header(files, key, run_id))


def _open_header(files: JournalFiles, key: str, run_id: str) -> RunHeader:
    name = f"{key}/{run_id}/{HEADER}"
    data = files.get(name)
    if data is None:
        raise UsageError(
            f"no unfinished run {run_id} of this spec in {files.uri(key)}; it finished already, or the spec "
            "changed since it ran (only a run of the very same spec can be resumed)"
        )
    try:
        header = RunHeader.from_json(data, files.uri(name))
    except BadJournalObject as exc:
        raise UsageError(f"the journal {files.uri(name)} is not usable ({exc}); start over with --remeasure") from None
    if (header.run_key, header.run_id) != (key, run_id):
        raise UsageError(f"the journal {files.uri(name)} names another run; start over with --remeasure")
    return header
