"""Each regression's triage status: what people decided about it, kept in the results themselves.

A regression (a step slower, or a series' drift) is `open` until the data or a person says
otherwise. The data says `recovered` (or `blip`) when a later step undoes it (kernelsweep.report.
summary computes that); a person says `acknowledged` (with a reason and a link: a known, accepted
slowdown) or `fixed` (by a named change, a commit or an SDK version, with a link), or reopens it.
Both stop a regression failing the report; a reopened one is judged by the data again.

The people's side lives in `<results>/_triage/changes.json` (kernelsweep.report.triage_file), every
change appended with who made it and when, so the history is never lost; a regression's status is
the last change that names it. Each change names concrete regressions (series and night), never a
pattern, so acknowledging today's step never silences next month's. The `--acknowledged` TOML file
of `report` is the same notion from outside the results: its entries count as acknowledgements
older than any recorded change, so a recorded reopen or fix overrides them.

`load(results)` is the read side for anything that shows statuses (the report, a site).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from kernelsweep.errors import UsageError
from kernelsweep.report import triage_file
from kernelsweep.report.acknowledge import Acknowledgement
from kernelsweep.report.regress import Step
from kernelsweep.stores.locations import Location

ACKNOWLEDGED, FIXED, OPEN = "acknowledged", "fixed", "open"
STATUSES = (ACKNOWLEDGED, FIXED, OPEN)  # what a change can set (open: reopened)
_FIELDS = ("kernel", "shape", "dtype", "platform", "variant")


@dataclass(frozen=True)
class Regression:
    """Which regression a change is about: its series and the night of its step (None: the series' drift,
    which has no night of its own)."""

    kernel: str
    shape: str
    dtype: str
    platform: str
    variant: str
    night: date | None

    @classmethod
    def of(cls, step: Step, drift: bool = False) -> Regression:
        kernel, shape, dtype, platform, variant = step.series
        return cls(kernel, shape, dtype, platform, variant, None if drift else step.first_after.run_date)

    def to_json(self) -> dict[str, str | None]:
        return {**{f: getattr(self, f) for f in _FIELDS}, "night": self.night.isoformat() if self.night else None}

    @classmethod
    def from_json(cls, doc: Any) -> Regression:
        if not isinstance(doc, dict) or not all(isinstance(doc.get(f), str) for f in _FIELDS):
            raise ValueError(f"a regression needs {', '.join(_FIELDS)} as text")
        night = doc.get("night")
        if night is not None and not isinstance(night, str):
            raise ValueError("a regression's night is a date (YYYY-MM-DD) or null")
        kernel, shape, dtype, platform, variant = (doc[f] for f in _FIELDS)
        return cls(kernel, shape, dtype, platform, variant, date.fromisoformat(night) if night else None)

    def describe(self) -> str:
        series = " ".join(p for p in (self.kernel, self.shape, self.variant, self.dtype, self.platform) if p)
        return f"{series} {'drift' if self.night is None else f'step of {self.night}'}"


@dataclass(frozen=True)
class Status:
    """A person's decision about one regression, as the last change naming it set it."""

    status: str  # acknowledged, fixed, or open (reopened)
    reason: str | None
    link: str | None
    fixed_by: str | None  # the change that fixed it: a commit, or an SDK version
    by: str  # who: user@host, or the --acknowledged file
    at: str | None  # when (UTC, ISO 8601); None for the --acknowledged file's entries


@dataclass(frozen=True)
class Change:
    """One triage action: a status set on one or more regressions at once, by someone, at a time."""

    at: str
    by: str
    status: str
    regressions: tuple[Regression, ...]
    reason: str | None = None
    link: str | None = None
    fixed_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "by": self.by,
            "status": self.status,
            "reason": self.reason,
            "link": self.link,
            "fixed_by": self.fixed_by,
            "regressions": [r.to_json() for r in self.regressions],
        }

    @classmethod
    def from_json(cls, doc: Any) -> Change:
        if not isinstance(doc, dict) or doc.get("status") not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        if not all(isinstance(doc.get(k), str) for k in ("at", "by")) or not isinstance(doc.get("regressions"), list):
            raise ValueError("a change needs at, by and a list of regressions")
        texts = {k: doc.get(k) for k in ("reason", "link", "fixed_by")}
        if any(v is not None and not isinstance(v, str) for v in texts.values()):
            raise ValueError("reason, link and fixed_by are text or null")
        regressions = tuple(Regression.from_json(r) for r in doc["regressions"])
        return cls(doc["at"], doc["by"], doc["status"], regressions, **texts)

    def status_of(self) -> Status:
        return Status(self.status, self.reason, self.link, self.fixed_by, self.by, self.at)


@dataclass(frozen=True)
class Statuses:
    """Every recorded change (oldest first) and the --acknowledged entries: the status of any regression."""

    changes: tuple[Change, ...] = ()
    acknowledged: tuple[Acknowledgement, ...] = ()
    source: str = ""  # the triage file's location, for messages
    _current: dict[Regression, Status] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for change in self.changes:  # the last change naming a regression sets its status
            for regression in change.regressions:
                self._current[regression] = change.status_of()

    @property
    def current(self) -> dict[Regression, Status]:
        """Each regression a change names, with the status its last change set (`open` if reopened)."""
        return dict(self._current)

    def of(self, step: Step, drift: bool = False) -> Status | None:
        """The decision that holds for this step (or, with `drift`, this series' drift): None while nobody
        decided, or its last change reopened it; then the data's own state (open, recovered) applies."""
        recorded = self._current.get(Regression.of(step, drift))
        if recorded is not None:
            return None if recorded.status == OPEN else recorded
        ack = next((a for a in self.acknowledged if a.matches(step)), None)
        return None if ack is None else Status(ACKNOWLEDGED, ack.reason, ack.link, None, "--acknowledged file", None)

    def history(self, regression: Regression) -> list[Change]:
        """Every change that named this regression, oldest first."""
        return [c for c in self.changes if regression in c.regressions]


def load(results: Location | str, acknowledged: Sequence[Acknowledgement] = ()) -> Statuses:
    """The statuses people set on the regressions of `results` (a folder or s3://), plus the entries of an
    `--acknowledged` file: what the report, and anything else that shows regressions, reads. A triage
    file kernelsweep cannot read as one is a usage error naming it."""
    doc = triage_file.read(results)
    source = str(triage_file.location(results))
    try:
        changes = tuple(Change.from_json(c) for c in doc["changes"])
    except ValueError as exc:
        raise UsageError(
            f"{source}: a change is not as `kernelsweep triage` writes it ({exc}); fix or remove it"
        ) from None
    return Statuses(changes, tuple(acknowledged), source)


def record(results: Location | str, change: Change) -> str:
    """Append one change to the results' triage file; returns its location."""
    return triage_file.append(results, change.to_json())
