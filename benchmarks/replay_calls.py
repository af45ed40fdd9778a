"""A point's API calls as a fixture: what a recording proxy saw of a many-point shard, cut into the
flow run's calls (opening it, closing it) and one point's, each turned into a template a replayed run
or point fills with ids and times of its own.

A recorded call is the request (method, path, body), the response (status, body) and, for the
events websocket, each message the client sent on it, in the order the client started them.
Templating replaces every UUID with a numbered placeholder and every ISO timestamp with its offset
from the recording's start: at replay, a placeholder first seen in a request (an id the client makes:
task runs, states, events) becomes a fresh UUID per point, one first seen in a response (an id the
server makes: the flow, the flow run) is bound from the replayed response at the same place in it,
and times are moved to the replay's clock. The route template (ids as `{id}`) names a call in the
latency figures. The sections share their placeholders (a point's events name the flow run its run's
opening created), each keeps its own clock (a point's times are offsets from its own first call).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Date and time of day, to the microsecond; the zone suffix (Z, +00:00 or none) is left as recorded.
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?")
PLACEHOLDER = re.compile(r"\{(id|t):([^}]+)\}")
FORMAT = 2


@dataclass
class Exchange:
    """One HTTP call or one websocket message as the recording proxy saw it."""

    kind: str  # "http" or "ws"
    started: float  # seconds on the proxy's clock
    method: str
    path: str
    body: str  # request body text, or the websocket message
    status: int = 0
    response: str = ""


@dataclass
class Step:
    """One call of the fixture, templated."""

    kind: str
    method: str
    route: str
    path: str
    body: str
    request_bytes: int
    response_bytes: int = 0
    status: int = 0
    binds: list[tuple[list[str | int], str]] = field(default_factory=list)  # response path -> placeholder

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def route_of(path: str) -> str:
    """The route template of a request path: ids as `{id}`, the query string dropped."""
    return UUID.sub("{id}", path.split("?", 1)[0])


@dataclass
class Fixture:
    """A recorded shard: its flow run's calls before its first point's and from then on, and the calls
    of one of its `points_per_run` points."""

    points_per_run: int
    run_open: list[Step]
    point: list[Step]
    run_close: list[Step]


def split_shard(exchanges: list[Exchange], points_of: Callable[[list[Exchange]], list[str | None]]) -> Fixture:
    """The fixture of a recorded shard: `points_of` names the point each call belongs to (None: the
    flow run's own). The run's calls started before the first point's open the run, the rest close
    it; of the points' calls, the first point's are kept."""
    exchanges = sorted(exchanges, key=lambda e: e.started)
    owners = points_of(exchanges)
    points = list(dict.fromkeys(p for p in owners if p is not None))
    if not points:
        raise ValueError("the recording holds no point's calls")
    first = owners.index(points[0])
    ids: dict[str, str] = {}
    run_open = template([e for e, p in zip(exchanges[:first], owners[:first], strict=True) if p is None], ids)
    point = template([e for e, p in zip(exchanges, owners, strict=True) if p == points[0]], ids)
    rest = zip(exchanges[first:], owners[first:], strict=True)
    return Fixture(len(points), run_open, point, template([e for e, p in rest if p is None], ids))


def template(exchanges: list[Exchange], ids: dict[str, str] | None = None) -> list[Step]:
    """The steps from what the proxy saw, ordered by when the client started each; `ids` carries the
    placeholders of sections templated before (a dict this fills in)."""
    exchanges = sorted(exchanges, key=lambda e: e.started)
    if not exchanges:
        return []
    clock_start = _earliest_time(exchanges)
    ids = {} if ids is None else ids
    steps = []
    for e in exchanges:
        path = _templated(e.path, ids, clock_start)
        body = _templated(e.body, ids, clock_start)
        step = Step(e.kind, e.method, route_of(e.path), path, body, len(e.body.encode()))
        if e.kind == "http":
            step.status, step.response_bytes = e.status, len(e.response.encode())
            step.binds = _binds(e.response, ids)
        steps.append(step)
    return steps


def _earliest_time(exchanges: list[Exchange]) -> datetime:
    times = [_parse_time(m.group()) for e in exchanges for m in TIMESTAMP.finditer(e.path + e.body + e.response)]
    return min(times) if times else datetime(2000, 1, 1)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _templated(text: str, ids: dict[str, str], clock_start: datetime) -> str:
    """Ids and times of `text` as placeholders; an id not met before is numbered now."""

    def placeholder(match: re.Match[str]) -> str:
        return "{id:%s}" % ids.setdefault(match.group(), str(len(ids)))

    def offset(match: re.Match[str]) -> str:
        return "{t:%.6f}" % (_parse_time(match.group()) - clock_start).total_seconds()

    return TIMESTAMP.sub(offset, UUID.sub(placeholder, text))


def _binds(response: str, ids: dict[str, str]) -> list[tuple[list[str | int], str]]:
    """Where in a JSON response each id the recording had not met before stands (the server made it)."""
    try:
        document = json.loads(response)
    except ValueError:
        return []
    binds = []
    for where, value in _leaves(document, []):
        if isinstance(value, str) and UUID.fullmatch(value) and value not in ids:
            ids[value] = str(len(ids))
            binds.append((where, ids[value]))
    return binds


def _leaves(node: Any, where: list[str | int]) -> Iterator[tuple[list[str | int], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, [*where, key])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, [*where, index])
    else:
        yield where, node


class PointIds:
    """One replayed point's ids and clock: fresh UUIDs for the client's, bound ones for the server's."""

    def __init__(self, now: datetime | None = None, ids: dict[str, str] | None = None) -> None:
        self.ids: dict[str, str] = dict(ids or {})
        self.clock_start = (now or datetime.now(UTC)).replace(tzinfo=None)

    def section(self, now: datetime | None = None) -> PointIds:
        """Ids for a later section of the same run: the run's so far, fresh ones for what it makes,
        times on a clock started now."""
        return PointIds(now, self.ids)

    def fill(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            kind, key = match.groups()
            if kind == "id":
                return self.ids.setdefault(key, str(uuid.uuid4()))
            return (self.clock_start + timedelta(seconds=float(key))).isoformat(timespec="microseconds")

        return PLACEHOLDER.sub(value, text)

    def bind(self, step: Step, response: str) -> bool:
        """Take the server's ids from a replayed response; False when one is not where it was."""
        if not step.binds:
            return True
        try:
            document = json.loads(response)
        except ValueError:
            return False
        ok = True
        for where, key in step.binds:
            node: Any = document
            try:
                for part in where:
                    node = node[part]
            except (KeyError, IndexError, TypeError):
                ok = False
                continue
            self.ids[key] = str(node)
        return ok


SECTIONS = ("run_open", "point", "run_close")


def dump(fixture: Fixture, how_to_record: str) -> str:
    sections = {name: [s.to_json() for s in getattr(fixture, name)] for name in SECTIONS}
    document = {"format": FORMAT, "recorded_by": how_to_record, "points_per_run": fixture.points_per_run, **sections}
    return json.dumps(document, indent=1)


def load_fixture(text: str) -> Fixture:
    document = json.loads(text)
    if document.get("format") != FORMAT:
        raise ValueError(f"fixture format {document.get('format')!r}, this replay reads {FORMAT}: re-record it")
    sections = {name: [_step(s) for s in document[name]] for name in SECTIONS}
    return Fixture(document["points_per_run"], **sections)


def _step(saved: dict[str, Any]) -> Step:
    return Step(**{**saved, "binds": [(list(w), k) for w, k in saved.get("binds", [])]})
