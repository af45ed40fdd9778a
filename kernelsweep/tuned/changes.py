"""What changed in the tuned store, for the report: each time a key's best was replaced, from what to
what, when, and the verdict that replaced it.

The entries keep it (kernelsweep.tuned.record): a replaced best goes into the entry's `history`, newest
first, with the time it was replaced (`until`) and the verdict's reasons (`why`); a best replaced is
always replaced by a clear win, the store's rule. An entry carried over from an older SDK by the re-check
names that SDK (`carried_from`), so a key re-tuned after an SDK bump says which SDK's best it replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

VERDICT = "clear win"  # the only verdict that replaces a stored best (kernelsweep.tuned.record.decide)


@dataclass(frozen=True)
class StoreChange:
    key: dict[str, Any]
    was: dict[str, Any]  # the tunables replaced
    now: dict[str, Any]  # the tunables that replaced them
    at: str  # when (UTC, ISO 8601)
    why: str  # the verdict's reasons
    was_sdk: str | None  # the compiler whose best was carried over and then replaced, when it was another SDK's

    def row(self) -> dict[str, str | int | float | bool | None]:
        k = self.key
        was = _text(self.was) + (f" (from {self.was_sdk})" if self.was_sdk else "")
        return {
            "kernel": k["kernel"], "shape": k["shape"], "dtype": k["dtype"], "platform": k["platform"],
            "lnc": k.get("lnc"), "sdk": k["sdk"].get("compiler"), "was": was, "now": _text(self.now),
            "at": f"{self.at[:16].replace('T', ' ')} UTC", "verdict": VERDICT, "why": self.why,
        }  # fmt: skip


def store_changes(
    entries: Sequence[dict[str, Any]], since: datetime | None = None, limit: int = 20
) -> list[StoreChange]:
    """Every replacement the entries remember (since `since`, when given), newest first, at most `limit`."""
    found = []
    for e in entries:
        now = e["best"]["tunables"]
        for h in e.get("history", []):
            carried = (h.get("carried_from") or {}).get("compiler")
            found.append(StoreChange(e["key"], h["tunables"], now, h["until"], h.get("why", ""), carried))
            now = h["tunables"]
    if since is not None:
        found = [c for c in found if datetime.fromisoformat(c.at) >= since]
    return sorted(found, key=lambda c: c.at, reverse=True)[:limit]


def _text(tunables: dict[str, Any]) -> str:
    return ",".join(f"{n}={v}" for n, v in tunables.items())
