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
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date, datetime
from typing import Any

from kernelsweep.errors import UsageError
from kernelsweep.locations import Location
from kernelsweep.names import slug
from kernelsweep.results.journal_files import JournalFiles, open_files
from kernelsweep.results.rows import Row
from kernelsweep.spec import Point, SweepSpec

HEADER = "run.json"
FORMAT_VERSION = 1
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


@dataclass(frozen=True)
class RunHeader:
    run_key: str
    run_id: str  # the flow run that started the run; its rows and objects carry this id
    run_date: date  # the date in the objects' keys, fixed at the start
    sweep: str
    started_at: str
    shards: dict[str, str] = field(default_factory=dict)  # shard index -> that shard's flow run id

    def to_json(self) -> bytes:
        return json.dumps({"format": FORMAT_VERSION, **asdict(self), "run_date": self.run_date.isoformat()}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RunHeader:
        doc = json.loads(data)
        doc.pop("format", None)
        return cls(**{**doc, "run_date": date.fromisoformat(doc["run_date"])})


def encode_row(row: Row) -> bytes:
    """Exact: `decode_row(encode_row(row)) == row`, so an object assembled from the journal has the
    very bytes one assembled from memory would (floats round-trip through JSON's repr)."""
    doc: dict[str, Any] = {f.name: getattr(row, f.name) for f in fields(Row)}
    doc["metrics"] = dict(row.metrics)
    for name in _TIMES:
        doc[name] = doc[name].isoformat() if doc[name] is not None else None
    return json.dumps({"format": FORMAT_VERSION, "row": doc}).encode()


def decode_row(data: bytes) -> Row:
    doc = json.loads(data)["row"]
    for name in _TIMES:
        doc[name] = datetime.fromisoformat(doc[name]) if doc[name] is not None else None
    return Row(**doc)


def entry_name(point: Point) -> str:
    """A point's entry: a UUID of its id, so any point id (however long) makes a short, safe name."""
    return f"{uuid.uuid5(_POINT_NAMESPACE, point.point_id)}.json"


class Journal:
    """One run's journal. `record` is called from the flow's thread as each point finishes."""

    def __init__(self, files: JournalFiles, header: RunHeader) -> None:
        self.files, self.header = files, header
        self.base = f"{header.run_key}/{header.run_id}"

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

    def completed(self, points: Iterable[Point]) -> dict[str, Row]:
        """point_id -> row, for each of `points` whose journaled row is ok (failed points run again).

        An entry that cannot be read back, or that names another point, is no measurement: it is
        reported and its point runs again.
        """
        wanted = {entry_name(p): p for p in points}
        present = [n for n in self.files.list(f"{self.base}/points/") if n.rsplit("/", 1)[-1] in wanted]
        with ThreadPoolExecutor(READ_THREADS) as pool:
            blobs = list(pool.map(self.files.get, present))
        rows: dict[str, Row] = {}
        for name, blob in zip(present, blobs, strict=True):
            point = wanted[name.rsplit("/", 1)[-1]]
            try:
                row = decode_row(blob or b"")
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("journal entry %s is unreadable (%s); point %s runs again", name, exc, point.point_id)
                continue
            same_point = (row.kernel, row.shape, row.dtype, row.platform, row.lnc, row.tunables or "") == (
                point.kernel,
                point.shape,
                point.dtype,
                point.platform,
                point.lnc,
                point.tunables_text,
            )
            if same_point and row.status == "ok" and row.flow_run_id in self.identities():
                rows[point.point_id] = row
        return rows

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
        so a close interrupted half-way cannot bring back a run with some of its entries gone."""
        self.files.delete([f"{self.base}/{HEADER}"])
        self.files.delete(self.files.list(f"{self.base}/"))


@dataclass(frozen=True)
class ResumePlan:
    """What a run of a spec does about earlier work, decided in one place (`plan_resume`) for the CLI's
    message, the sweep flow and each of its shards: finish `resumed` (an interrupted run of the very
    same spec) reusing `reused`, or start afresh when `resumed` is None."""

    run_key: str
    resumed: RunHeader | None
    reused: dict[str, Row]  # point_id -> its journaled row, reused as it is

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
    unless `remeasure`. Neither given: a fresh start."""
    header = None
    if run_id is not None:
        header = _open_header(open_files(results), key, run_id)
    elif find:
        header = find_unfinished(results, key)
    if header is None or remeasure:
        return ResumePlan(key, header, {})
    return ResumePlan(key, header, Journal(open_files(results), header).completed(points))


def begin(
    results: Location | str, plan: ResumePlan, run_id: str, run_date: date, sweep: str, started_at: datetime
) -> Journal:
    """The journal the run writes to: the resumed run's own, or a new one under `run_id` and `run_date`."""
    files = open_files(results)
    if plan.resumed is not None:
        return Journal(files, plan.resumed)
    header = RunHeader(
        run_key=plan.run_key, run_id=run_id, run_date=run_date, sweep=sweep, started_at=started_at.isoformat()
    )
    files.put(f"{plan.run_key}/{run_id}/{HEADER}", header.to_json())
    return Journal(files, header)


def open_run(results: Location | str, key: str, run_id: str) -> Journal:
    """The journal of an interrupted run; UsageError when there is none (finished, or another spec's)."""
    files = open_files(results)
    return Journal(files, _open_header(files, key, run_id))


def _open_header(files: JournalFiles, key: str, run_id: str) -> RunHeader:
    data = files.get(f"{key}/{run_id}/{HEADER}")
    if data is None:
        raise UsageError(
            f"no unfinished run {run_id} of this spec in {files.uri(key)}; it finished already, or the spec "
            "changed since it ran (only a run of the very same spec can be resumed)"
        )
    return RunHeader.from_json(data)


def find_unfinished(results: Location | str, key: str) -> RunHeader | None:
    """The newest run of this spec that started but never wrote its objects, if any."""
    files = open_files(results)
    headers = []
    for name in files.list(f"{key}/"):
        if name.endswith(f"/{HEADER}") and name.count("/") == 2:
            data = files.get(name)
            try:
                headers.append(RunHeader.from_json(data or b""))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("journal header %s is unreadable (%s); ignoring that run", files.uri(name), exc)
    return max(headers, key=lambda h: h.started_at, default=None)
