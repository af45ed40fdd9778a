"""Acknowledged steps: a known, accepted slowdown stops failing reports, and the report says why.

A small TOML file lists them, one `[[step]]` table each; every key but `reason` narrows the match
(a key left out matches anything), and `night` is the date of the first run after the step:

    [[step]]
    kernel = "vector_add"
    shape = "n=8192,partition_size=128,free_size=1"
    platform = "trn2"
    night = 2026-03-22
    reason = "compiler 2.22 trades this shape for the large ones (ticket PERF-123)"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path

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
        unknown = set(entry) - {*_KEYS, "night", "reason"}
        if unknown or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            problem = f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else "no reason"
            raise UsageError(f"--acknowledged {path}: step {i} has {problem}; each [[step]] needs a reason")
        night = entry.get("night")
        if night is not None and not isinstance(night, date):
            raise UsageError(f"--acknowledged {path}: step {i} night {night!r} is not a date (YYYY-MM-DD)")
        out.append(Acknowledgement(**{k: entry.get(k) for k in (*_KEYS, "night", "reason")}))
    return out


def reason_for(step: Step, acknowledged: list[Acknowledgement]) -> str | None:
    return next((a.reason for a in acknowledged if a.matches(step)), None)
