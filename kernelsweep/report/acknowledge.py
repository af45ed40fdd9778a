"""Acknowledged steps: a known, accepted slowdown stops failing reports, and the report says why.

A small TOML file lists them, one `[[step]]` table each; every key but `reason` narrows the match
(a key left out matches anything), and `night` is the date of the first run after the step:

    [[step]]
    kernel = "vector_add"
    shape = "n=8192,partition_size=128,free_size=1"
    platform = "trn2"
    night = 2026-03-22
    reason = "compiler 2.22 trades this shape for the large ones (ticket PERF-123)"
    link = "https://tickets.example.com/PERF-123"

These are acknowledgements from outside the results; `kernelsweep triage` records them (and fixes,
and reopenings) inside the results, and kernelsweep.report.triage gives both one status.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from urllib.parse import urlsplit

from kernelsweep.errors import UsageError
from kernelsweep.report.regress import Step

_KEYS = ("kernel", "shape", "dtype", "platform")


@dataclass(frozen=True)
class Acknowledgement:
    reason: str
    kernel: str | None = None
    shape: str | None = None
    dtype: str | None = None
    platform: str | None = None
    night: date | None = None
    link: str | None = None

    def matches(self, step: Step) -> bool:
        wanted = (self.kernel, self.shape, self.dtype, self.platform)
        if any(w is not None and w != got for w, got in zip(wanted, step.series[:4], strict=True)):
            return False
        return self.night is None or self.night == step.first_after.run_date


def load_acknowledged(path: Path) -> list[Acknowledgement]:
    """The file's entries; a missing file, bad TOML or an entry without a reason is a usage error."""
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(
            f"--acknowledged {path}: cannot read it ({exc.strerror}); give an existing TOML file"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--acknowledged {path}: not valid TOML ({exc}); see docs/reports.md") from None
    out = []
    for i, entry in enumerate(doc.get("step", []), start=1):
        unknown = set(entry) - {*_KEYS, "night", "reason", "link"}
        if unknown or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            problem = f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else "no reason"
            raise UsageError(f"--acknowledged {path}: step {i} has {problem}; each [[step]] needs a reason")
        night = entry.get("night")
        if night is not None and not isinstance(night, date):
            raise UsageError(f"--acknowledged {path}: step {i} night {night!r} is not a date (YYYY-MM-DD)")
        bad_link = link_problem(entry.get("link"))
        if bad_link:
            raise UsageError(f"--acknowledged {path}: step {i} link {bad_link}")
        out.append(Acknowledgement(**{k: entry.get(k) for k in (*_KEYS, "night", "reason", "link")}))
    return out


def link_problem(link: object) -> str | None:
    """Why `link` cannot be a status's link (None when it can, or is absent): it must open in a browser."""
    if link is None:
        return None
    parts = urlsplit(link) if isinstance(link, str) else None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.netloc
        or any(c.isspace() for c in str(link))
    ):
        return f"{link!r} is not an http(s) URL; give the ticket's or change's address, e.g. https://host/PERF-123"
    return None
