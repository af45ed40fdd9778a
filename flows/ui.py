"""What a sweep shows in the Prefect UI, written once per flow run: a lineage table (every point's
status, row id and artifacts by content address), a summary table, and the asset keys of the
`@materialize` store task (the run's Parquet objects, made from its artifact store).

Once per run, not per point: an artifact or an asset dependency per point cost the Prefect server an
API call, events and database rows for every point (docs/performance.md has the figures), which a
fleet server pays for every point of every host. Both tables are keyed by the sweep's name, so
Prefect versions them run after run: the sweep's history in the UI. One point's history across runs
is in the results themselves (`kernelsweep report`, `kernelsweep lineage ROW_ID`), which is where the
open-source server leaves lineage anyway: it keeps asset events but draws no asset graph.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import date

from prefect.artifacts import create_table_artifact
from prefect.assets import Asset

from kernelsweep.names import slug
from kernelsweep.results import Row, RowSummary
from kernelsweep.results.writer import planned_uris
from kernelsweep.stores import Location, absolute_uri

ARTIFACT_KEY_LIMIT = 200  # Prefect artifact keys: [a-z0-9-]; keep them readable in the UI
_RESTRICTED_ASSET_CHARS = re.compile(r"[\s#?&%\"'<>\[\]{}|\\^`]")
SINGLE_ARTIFACTS = ("kernel_source", "ir", "neff", "ntff", "profile")


def artifact_key(*parts: str) -> str:
    key = slug("-".join(parts))
    return key[:ARTIFACT_KEY_LIMIT].rstrip("-")


def lineage_record(row: Row) -> dict[str, str]:
    """One point's lineage as a table row: what ran, how it ended, and each artifact's content address."""
    record = {
        "kernel": row.kernel,
        "shape": row.shape,
        "dtype": row.dtype,
        "platform": row.platform,
        "status": row.status,
        "error": f"{row.error_class}: {row.error_message}" if row.status != "ok" else "",
        "total_time_us": "" if row.total_time_us is None else f"{row.total_time_us:g}",
        "row_id": row.row_id,
    }
    for name in SINGLE_ARTIFACTS:
        record[name] = getattr(row, f"{name}_uri") or ""
    for group, refs in (("inputs", row.inputs), ("outputs", row.outputs)):
        record[group] = "; ".join(f"{ref['name']}={ref['uri']}" for ref in refs or [])
    return record


def lineage_artifact(sweep_name: str, rows: list[Row]) -> None:
    create_table_artifact(
        key=artifact_key("lineage", sweep_name),
        table=[lineage_record(row) for row in rows],
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
