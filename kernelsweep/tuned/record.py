"""Putting a report's best configurations into the tuned store, and the rule for a new best.

A key seen for the first time takes the best as it stands. Where the store already holds a best:
the same configuration winning again refreshes its measurements and when and where it was last
confirmed; a different configuration replaces the incumbent only when its win over the runner-up is
a clear win by the verdict rule (kernelsweep.report.stats). A tie or an inconclusive gap keeps the
incumbent and notes the challenge, so a stored best never flips on noise.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kernelsweep.report.best import Best
from kernelsweep.report.load import ReportRow
from kernelsweep.report.ranks import median_interval
from kernelsweep.tuned.keys import FORMAT_VERSION, numbers
from kernelsweep.tuned.store import TunedStore

NEW, CONFIRMED, REPLACED, KEPT = "new", "confirmed", "replaced", "kept"
HISTORY_KEPT = 20  # earlier bests an entry remembers (newest first)
MEDIAN_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Change:
    """What recording one key did, in words a report prints."""

    key: dict[str, Any]
    action: str
    why: str
    tunables: dict[str, int | str]  # the stored best after recording

    def line(self) -> str:
        k = self.key
        config = ",".join(f"{n}={v}" for n, v in self.tunables.items())
        where = f"{k['kernel']} {k['shape']} {k['dtype']} {k['platform']} lnc={k.get('lnc')}"
        return f"{where}: {self.action} {config} ({self.why})"


def entry_key(r: ReportRow) -> dict[str, Any]:
    sdk = {"compiler": r.compiler_version, "runtime": r.runtime_version, "nki": r.nki_version}
    return {"kernel": r.kernel, "shape": r.shape, "dtype": r.dtype, "platform": r.platform, "lnc": r.lnc, "sdk": sdk}


def _config(r: ReportRow) -> dict[str, Any]:
    low_high = list(median_interval(r.latencies_us, MEDIAN_CONFIDENCE)) if r.latencies_us else None
    return {
        "tunables": numbers(r.tunables or ""),
        "latency_median_us": r.latency_us,
        "median_interval_us": low_high,
        "repeats": r.repeats,
        "row_id": r.row_id,
        "flow_run_id": r.flow_run_id,
        "search_trial": r.search_trial,
    }


def make_entry(b: Best, confirmed: dict[str, Any]) -> dict[str, Any]:
    r = b.best
    gap = None
    if b.gap is not None:
        gap = {"ratio": b.gap.ratio, "low": b.gap.low, "high": b.gap.high, "verdict": b.verdict, "why": b.why}
    return {
        "format_version": FORMAT_VERSION,
        "key": entry_key(r),
        "toolchain": r.toolchain_name,
        "simulated": r.is_simulation,
        "best": _config(r),
        "runner_up": _config(b.runner_up) if b.runner_up is not None else None,
        "gap": gap,
        "tried": b.tried,
        "failed": b.failed,
        "confirmed": confirmed,
        "history": [],
    }


def record(
    store: TunedStore, bests: Sequence[Best], *, by: str, host: str | None = None, at: datetime | None = None
) -> list[Change]:
    """Each best into the store by the rule above; what happened to each key."""
    when = (at or datetime.now(UTC)).isoformat(timespec="seconds")
    changes: list[Change] = []
    for b in bests:
        confirmed = {"at": when, "host": host or socket.gethostname(), "by": by, "flow_run_id": b.best.flow_run_id}
        fresh = make_entry(b, confirmed)
        old = store.get(fresh["key"])
        change, entry = decide(old, fresh, b)
        if entry is not None:
            store.put(entry)
        changes.append(change)
    return changes


def decide(old: dict[str, Any] | None, fresh: dict[str, Any], b: Best) -> tuple[Change, dict[str, Any] | None]:
    """(what happens to the key, the entry to write or None to leave the stored one as it is)."""
    key, tunables = fresh["key"], fresh["best"]["tunables"]
    if old is None:
        return Change(key, NEW, f"first best of {b.tried} configuration(s), {b.verdict}", tunables), fresh
    incumbent = old["best"]["tunables"]
    if incumbent == tunables:
        entry = {**fresh, "history": old.get("history", [])}
        return Change(key, CONFIRMED, f"won again over {b.tried} configuration(s)", tunables), entry
    if b.verdict == "clear win":
        earlier = {"tunables": incumbent, "row_id": old["best"]["row_id"], "until": fresh["confirmed"]["at"]}
        if old.get("carried_from"):  # the incumbent was an older SDK's best: the report says which
            earlier["carried_from"] = old["carried_from"]
        entry = {**fresh, "history": [{**earlier, "why": b.why}, *old.get("history", [])][:HISTORY_KEPT]}
        return Change(key, REPLACED, f"clear win over the runner-up: {b.why}", tunables), entry
    challenge = {"tunables": tunables, "row_id": fresh["best"]["row_id"], "verdict": b.verdict, "why": b.why}
    entry = {**old, "last_challenge": {**challenge, "at": fresh["confirmed"]["at"]}}
    entry.pop("seal", None)
    return Change(key, KEPT, f"the challenger's win is a {b.verdict}, not a clear win: {b.why}", incumbent), entry
