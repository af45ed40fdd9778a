"""What a sweep shows in the Prefect UI, written once per flow run: a lineage list (every point's
status, row id and artifacts by content address), a summary table, and the asset keys of the
`@materialize` store task (the run's Parquet objects, made from its artifact store).

Once per run, not per point: an artifact or an asset dependency per point cost the Prefect server an
API call, events and database rows for every point (docs/performance.md has the figures), which a
fleet server pays for every point of every host. Both artifacts are keyed by the sweep's name, so
Prefect versions them run after run: the sweep's history in the UI. One point's history across runs
is in the results themselves (`kernelsweep report`, `kernelsweep lineage ROW_ID`), which is where the
open-source server leaves lineage anyway: it keeps asset events but draws no asset graph.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import date

from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.assets import Asset

from kernelsweep.names import slug
from kernelsweep.results import Row, RowSummary
from kernelsweep.results.writer import planned_uris
from kernelsweep.stores import Location, absolute_uri

ARTIFACT_KEY_LIMIT = 200  # Prefect artifact keys: [a-z0-9-]; keep them readable in the UI
_RESTRICTED_ASSET_CHARS = re.compile(r"[\s#?&%\"'<>\[\]{}|\\^`]")
SINGLE_ARTIFACTS = ("kernel_source", "ir", "neff", "ntff", "profile")
SHORT_SHA = 12  # hex digits of a sha256 the lineage table shows, as git shows a commit's


def artifact_key(*parts: str) -> str:
    key = slug("-".join(parts))
    return key[:ARTIFACT_KEY_LIMIT].rstrip("-")


def lineage_line(row: Row) -> str:
    """One point's lineage as a list item: what ran, how it ended, its row id, and each artifact by the
    first SHORT_SHA hex digits of its sha256 (its content address). A list, not a table: the UI never
    wraps a table cell, and the full addresses (about 100 characters each) put the table's right part
    out of sight; the full ones are the row's `*_uri` columns, which `kernelsweep lineage ROW_ID` fetches
    and verifies."""
    if row.status != "ok":
        outcome = " ".join(f"{row.status}: {row.error_class}: {row.error_message}".split())
    else:
        outcome = row.status if row.total_time_us is None else f"{row.status}, {row.total_time_us:g} us"
    made = [(name, getattr(row, f"{name}_uri")) for name in SINGLE_ARTIFACTS]
    for group, refs in (("inputs", row.inputs), ("outputs", row.outputs)):
        made += [(f"{group}[{ref['name']}]", ref["uri"]) for ref in refs or []]
    artifacts = ", ".join(f"{name} `{uri.rsplit('/', 1)[-1][:SHORT_SHA]}`" for name, uri in made if uri)
    return f"**{row.kernel} {row.shape} {row.dtype} {row.platform}**: {outcome}; row `{row.row_id}`; {artifacts}"


def lineage_artifact(sweep_name: str, rows: list[Row]) -> None:
    create_markdown_artifact(
        key=artifact_key("lineage", sweep_name),
        markdown="\n".join(
            [
                f"Each artifact by the first {SHORT_SHA} hex digits of its sha256 in the artifact store; "
                "`kernelsweep lineage ROW_ID --results RESULTS` fetches and verifies them.",
                "",
                *(f"- {lineage_line(row)}" for row in rows),
            ]
        ),
        description=f"lineage of the points of sweep {sweep_name} in this run: every artifact by content address",
    )


def summary_artifact(sweep_name: str, rows: list[RowSummary]) -> None:
    create_table_artifact(
        key=artifact_key("sweep", sweep_name), table=[asdict(row) for row in rows], description=f"sweep {sweep_name}"
    )


def asset_key(uri: str) -> str:
    """Asset keys are URIs without spaces, brackets or quotes (Prefect refuses them)."""
    return _RESTRICTED_ASSET_CHARS.sub("-", uri)[:512]


def results_asset_keys(results: Location, platforms: list[str], run_date: date, flow_run_id: str) -> list[str]:
    """The Parquet objects this run will write, known before the write so the task can declare them."""
    return [asset_key(absolute_uri(uri)) for uri in planned_uris(results, platforms, run_date, flow_run_id)]


def upstream_asset_keys(artifacts: Location) -> list[Asset | str]:
    """The artifact store the rows' NEFFs and profiles are in: one upstream asset per run (each row
    names its own artifacts in it), where an asset per NEFF and profile cost two events per point."""
    return [asset_key(absolute_uri(artifacts))]
