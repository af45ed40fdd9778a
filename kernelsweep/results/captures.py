"""A point's capture, journaled the moment its NTFFs are stored: what a retried or resumed run extracts
from instead of taking the device again.

A row is journaled only once extracted, so a host killed between its capture and its extraction used
to leave the point to be captured again by whoever retried the shard: minutes of device time on a real
kernel, and a second set of measurements for one point. The capture's result is references to
content-addressed artifacts (kernelsweep.stage_results.CaptureResult), so its entry is small, and it
is reused only while the store still holds every NTFF it names. An entry that does not read back as a
capture is no capture: it is skipped with one warning, and the point is captured again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from kernelsweep.results.journal_check import BadJournalObject
from kernelsweep.stage_results import CaptureResult

FORMAT = 1


@dataclass(frozen=True)
class StoredCapture:
    """A capture and the task run that took it (the row's lineage keeps pointing at that run)."""

    point_id: str
    result: CaptureResult
    task_run_id: str | None = None


_ADAPTER = TypeAdapter(StoredCapture)


def encode_capture(stored: StoredCapture) -> bytes:
    return json.dumps({"format": FORMAT, "capture": _ADAPTER.dump_python(stored, mode="json")}).encode()


def decode_capture(data: bytes, point_id: str) -> StoredCapture:
    """The entry's capture, checked for shape and for being this point's; BadJournalObject otherwise."""
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise BadJournalObject(f"not a capture entry of format {FORMAT}")
        stored = _ADAPTER.validate_python(doc.get("capture"))
    except (ValueError, ValidationError) as exc:
        raise BadJournalObject(f"not a capture entry: {' '.join(str(exc).split())[:200]}") from None
    if stored.point_id != point_id:
        raise BadJournalObject("it holds another point's capture")
    return stored
