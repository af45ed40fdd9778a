"""The kernel's source with per-line heat: the share of instruction time each line took (hotspots).

A row with hotspots (kernelsweep.hotspots) links the NKI kernel's source file it was compiled from
(`nki_source_uri`); the HTML report fetches it from the artifact store and shows every line, hot
ones shaded by their share. Sources are fetched for at most MAX_VIEWS points (the latest rows with
the largest top share first) and at most MAX_SOURCE_BYTES each, so a big report stays bounded; a
source that cannot be fetched is said so, with the top lines still listed.
"""

from __future__ import annotations

import tempfile
from html import escape
from pathlib import Path

from kernelsweep.errors import KernelsweepError
from kernelsweep.hotspots import heat
from kernelsweep.report.load import ReportRow
from kernelsweep.stores.artifacts import ArtifactRef, open_store_for

MAX_VIEWS = 12
MAX_SOURCE_BYTES = 1 << 20
STYLE = """
.heat { font-family: ui-monospace, monospace; font-size: 12px; border: 1px solid #ddd; margin: 0.5em 0 1.5em;
        overflow-x: auto; max-width: 100%; }
.heat div { white-space: pre; padding: 0 6px; }
.heat span.share { display: inline-block; width: 12em; text-align: right; color: #555; }
.heat span.number { display: inline-block; width: 4em; text-align: right; color: #999; margin-right: 1em; }
"""


def with_hotspots(latest: list[ReportRow]) -> list[ReportRow]:
    """The rows whose heat is shown: those with hotspots, largest top share first, at most MAX_VIEWS."""
    rows = [r for r in latest if r.hotspots and r.nki_source_uri and r.nki_source_sha256]
    rows.sort(key=lambda r: -max(float(h["share_percent"]) for h in r.hotspots or [{"share_percent": 0}]))
    return rows[:MAX_VIEWS]


def fetch_source(row: ReportRow) -> str | None:
    """The row's NKI source text, checked against its sha256 by the store; None when unreachable."""
    assert row.nki_source_uri and row.nki_source_sha256
    ref = ArtifactRef(row.nki_source_uri, row.nki_source_sha256, 0)
    try:
        with tempfile.TemporaryDirectory(prefix="kernelsweep-heat-") as tmp:
            path = open_store_for(ref).fetch(ref, Path(tmp) / "source.py")
            if path.stat().st_size > MAX_SOURCE_BYTES:
                return None
            return path.read_text(errors="replace")
    except (KernelsweepError, OSError):
        return None


def section(rows: list[ReportRow]) -> str:
    """The heat views of `rows` as HTML (empty when none has hotspots)."""
    parts = []
    for row in rows:
        spots = row.hotspots or []
        title = f"{row.kernel} {row.shape} {row.dtype} {row.platform}"
        parts.append(f"<h3>{escape(title)}</h3>")
        source = fetch_source(row)
        file_name = str(spots[0]["file"]) if spots else "kernel.py"
        if source is None:
            listed = ", ".join(f"{h['file']}:{h['line']} {h['engine']} {float(h['share_percent']):.1f}%" for h in spots)
            parts.append(f"<p class='bad'>source not available; top lines: {escape(listed)}</p>")
            continue
        parts.append(_view(source, spots, file_name, title))
    return "\n".join(parts)


def _view(source: str, spots: list[dict], file_name: str, title: str) -> str:
    lines = heat(source, spots, file_name)
    top = max((share for _, _, share in lines), default=0.0) or 1.0
    engines: dict[int, list[str]] = {}
    for spot in spots:
        engines.setdefault(int(spot["line"]), []).append(str(spot["engine"]))
    out = [f"<div class='heat' data-kernel='{escape(title)}' data-file='{escape(file_name)}'>"]
    for number, text, share in lines:
        shade = f" style='background: rgba(214, 39, 40, {0.1 + 0.6 * share / top:.2f})'" if share else ""
        hot = f" class='hot' data-line='{number}' data-share='{share:.4f}'" if share else ""
        label = f"{share:5.1f}% {'/'.join(engines.get(number, []))}" if share else ""
        out.append(
            f"<div{hot}{shade}><span class='share'>{escape(label)}</span><span class='number'>{number}</span>"
            f"{escape(text)}</div>"
        )
    out.append("</div>")
    return "".join(out)
