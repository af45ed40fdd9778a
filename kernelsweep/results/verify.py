"""Lineage of one result row: fetch every artifact it links and check each against its sha256.

A row names the exact bytes behind its numbers (kernel source, IR, NEFF, each input, NTFF,
profile, each output) by content-addressed URI and hash. `verify_row` finds the row in a results
dataset (folder or `s3://`), fetches each of those artifacts from the store its URI names into
`dest` (under the file names the tools use, so the NEFF and NTFF can be opened again directly) and
reports, per artifact, whether the bytes are there and hash to what the row says. A bad artifact
is a line in the report, not an exception, so a caller can show every problem at once; only a row
that does not exist or a `dest` that cannot be written (usage mistakes, found before any fetch)
raise. Verification only reads: a corrupt artifact is reported and left in the store exactly as it
is (a past capture cannot be made again; kernelsweep.stores.artifacts). Fetched files are copies: editing
one never touches the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelsweep import names
from kernelsweep.errors import KernelsweepError, StoreError, UsageError
from kernelsweep.results import reader
from kernelsweep.results.outcome import RowSummary
from kernelsweep.stores.artifacts import ArtifactRef, ArtifactStore, open_store_for
from kernelsweep.stores.probe import probe_location

# (column prefix, file name in dest): the names the stages give these files.
SINGLE_ARTIFACTS = (
    ("kernel_source", names.KERNEL_SOURCE),
    ("ir", names.IR),
    ("neff", names.NEFF),
    ("ntff", names.NTFF),
    ("profile", "profile.json"),
    ("nki_source", "nki_kernel.py"),  # schema 3: the NKI kernel's source, which hotspots point into
)
OPTIONAL = frozenset({"nki_source"})  # rows written before it existed are ok without it
LIST_ARTIFACTS = (("inputs", names.input_file), ("outputs", names.output_file))
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_URI_HASH = re.compile(r"/sha256/([0-9a-f]{2})/([0-9a-f]{64})$")


@dataclass(frozen=True)
class ArtifactCheck:
    """One linked artifact: `error` is None when its bytes were fetched and hashed to `sha256`."""

    name: str  # "neff", "inputs[x]", ...
    uri: str | None
    sha256: str | None
    size_bytes: int | None  # of the verified file; the row's recorded size until then (lists only)
    path: Path | None  # the verified file under dest
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class LineageReport:
    row_id: str
    results_uri: str
    dest: Path
    row: RowSummary
    artifacts: tuple[ArtifactCheck, ...]
    hotspots: list[dict] | None = None  # the row's top source lines (schema 3), for the heat view
    hotspots_note: str | None = None  # why it has none
    neff_from: str | None = None  # where the NEFF came from (schema 4's `neff_compile_host`)

    @property
    def ok(self) -> bool:
        return all(a.ok for a in self.artifacts)

    @property
    def failed(self) -> list[ArtifactCheck]:
        return [a for a in self.artifacts if not a.ok]


def verify_row(results_uri: str, row_id: str, dest: Path) -> LineageReport:
    """Fetch and verify every artifact row `row_id` of `results_uri` links.

    Raises UsageError when there is no such row (or `results_uri` is not a results location) or `dest`
    cannot be written, and StoreError when the results cannot be read at all; everything about the
    artifacts themselves is in the report.
    """
    try:
        row = reader.find_row(results_uri, row_id)
    except OSError as exc:  # e.g. the bucket's region cannot be resolved: the results are unreachable
        raise StoreError(f"reading results at {results_uri}: {' '.join(str(exc).split())}", retryable=True) from exc
    if row is None:
        raise UsageError(
            f"no row {row_id} in {results_uri}; row ids are the row_id column of the results "
            "(check the id and that --results is the location the sweep wrote to)"
        )
    dest = Path(dest)
    probe_location(str(dest), "lineage", "--dest")  # before any fetch: not ten failures for one mistake
    stores: dict[str, ArtifactStore] = {}
    checks = [_verify(stores, dest, name, file, ref) for name, file, ref in _linked(row)]
    return LineageReport(
        row_id=row_id,
        results_uri=results_uri,
        dest=dest,
        row=RowSummary.from_record(row),
        artifacts=tuple(checks),
        hotspots=row.get("hotspots"),
        hotspots_note=row.get("hotspots_note"),
        neff_from=neff_origin(row),
    )


def neff_origin(row: dict) -> str | None:
    """`NEFF compiled on compile-a (found in the artifact store)`, or on this row's host in its run."""
    host = row.get("neff_compile_host")
    if not host:
        return None
    return f"NEFF compiled on {host} " + (
        "(found in the artifact store)" if row.get("compile_cache_hit") else "(in this run)"
    )


def default_dest(row_id: str) -> Path:
    """`lineage-<row id>`, as one folder in the working folder whatever the id holds (`../..` included)."""
    return Path("lineage-" + (_SAFE_NAME.sub("_", row_id)[:200] or "row"))


def _linked(row: dict) -> list[tuple[str, str, dict | None]]:
    """(name, file name, {uri, sha256, size_bytes} or None when not linked) for every artifact the
    row links, and for what an ok row must link but does not (a gap in its lineage)."""
    must_link = row.get("status") == "ok"
    linked: list[tuple[str, str, dict | None]] = []
    for column, file in SINGLE_ARTIFACTS:
        if column == "profile" and row.get("profile_format") == "parquet":
            file = "profile.parquet"
        uri, sha = row.get(f"{column}_uri"), row.get(f"{column}_sha256")
        if uri or sha:
            linked.append((column, file, {"uri": uri, "sha256": sha, "size_bytes": None}))
        elif must_link and column not in OPTIONAL:
            linked.append((column, file, None))
    for column, file_name in LIST_ARTIFACTS:
        entries = row.get(column) or []
        if not entries and must_link:
            linked.append((column, column, None))
        used: set[str] = set()
        for index, entry in enumerate(entries):
            label = entry.get("name") or str(index)
            file = file_name(_SAFE_NAME.sub("_", label).strip("._") or str(index))
            if file in used:  # two names that sanitise alike must not overwrite each other
                file = f"{index}-{file}"
            used.add(file)
            linked.append((f"{column}[{label}]", file, entry))
    return linked


def _verify(stores: dict[str, ArtifactStore], dest: Path, name: str, file: str, link: dict | None) -> ArtifactCheck:
    if link is None:
        return ArtifactCheck(name, None, None, None, None, "not linked, though the row is ok")
    uri, sha, size = link.get("uri"), link.get("sha256"), link.get("size_bytes")
    check = ArtifactCheck(name, uri, sha, size, None)
    if not uri or not sha:
        return _failed(check, f"the row has {'no uri' if not uri else 'no sha256'} for it")
    match = _URI_HASH.search(uri)
    if match is None or match.group(2) != sha or match.group(1) != sha[:2]:
        return _failed(check, "the uri does not name the row's sha256")
    target = dest / file
    try:
        store_root = uri[: match.start()]
        store = stores.get(store_root)
        if store is None:
            store = stores[store_root] = open_store_for(ArtifactRef(uri, sha, size or 0))
        store.fetch(ArtifactRef(uri, sha, size or 0), target)
    except (KernelsweepError, OSError) as exc:
        return _failed(check, str(exc) or type(exc).__name__)
    actual = target.stat().st_size
    if size is not None and actual != size:
        return ArtifactCheck(name, uri, sha, actual, target, f"{actual} bytes, the row records {size}")
    return ArtifactCheck(name, uri, sha, actual, target)


def _failed(check: ArtifactCheck, error: str) -> ArtifactCheck:
    return ArtifactCheck(check.name, check.uri, check.sha256, check.size_bytes, None, " ".join(error.split()))


def render(report: LineageReport) -> str:
    """A plain-text table: one line per artifact, then each failure's reason."""
    r = report.row
    lines = [
        f"row {report.row_id}: {r.kernel} {r.shape} {r.dtype} {r.platform} ({r.status}), "
        f"sweep {r.sweep}, flow run {r.flow_run_id}",
        f"results {report.results_uri}; artifacts fetched to {report.dest}",
        *([report.neff_from] if report.neff_from else []),
        "",
    ]
    header = ("artifact", "status", "bytes", "sha256", "file", "uri")
    table = [
        (
            a.name,
            "ok" if a.ok else "FAILED",
            "-" if a.size_bytes is None else str(a.size_bytes),
            a.sha256 or "-",
            a.path.name if a.path else "-",
            a.uri or "-",
        )
        for a in report.artifacts
    ]
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header) - 1)]
    for row in [header, *table]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])
    failed = report.failed
    lines.append("")
    for a in failed:
        lines.append(f"{a.name}: {a.error}")
    total = len(report.artifacts)
    if not total:
        lines.append("the row links no artifacts (it failed before any was stored)")
    elif failed:
        lines.append(f"{len(failed)} of {total} artifacts FAILED verification")
    else:
        lines.append(f"all {total} artifacts verified (sha256)")
    return "\n".join(lines)
