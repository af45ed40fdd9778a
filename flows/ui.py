"""What a sweep shows in the Prefect UI: a keyed artifact per kernel-shape point, a sweep summary
table, and asset keys for the `@materialize` store task.

Keyed artifacts are versioned by Prefect, so `lineage-<kernel>-<shape>-<platform>` shows one
point's history across every run in the UI. The rows themselves carry the same lineage, since the
open-source server keeps asset events but draws no asset graph.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import date
from pathlib import Path

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from kernelsweep.results.rows import Row
from kernelsweep.results.summary import RowSummary
from kernelsweep.results.writer import planned_uris
from kernelsweep.s3 import is_s3_uri

ARTIFACT_KEY_LIMIT = 200  # Prefect artifact keys: [a-z0-9-]; keep them readable in the UI
_RESTRICTED_ASSET_CHARS = re.compile(r"[\s#?&%\"'<>\[\]{}|\\^`]")
SINGLE_ARTIFACTS = ("kernel_source", "ir", "neff", "ntff", "profile")


def artifact_key(*parts: str) -> str:
    key = re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
    return key[:ARTIFACT_KEY_LIMIT].rstrip("-")


def point_artifact(row: Row) -> None:
    """The point's artifacts, versions and outcome, under a key stable across runs."""
    failure = f" ({row.error_class}: {row.error_message})" if row.status != "ok" else ""
    lines = [
        f"### {row.kernel} {row.shape} {row.dtype} on {row.platform}",
        f"status **{row.status}**{failure}",
        f"total_time_us {row.total_time_us}; toolchain {row.toolchain}" + (" (simulated)" if row.is_simulation else ""),
        f"compiler {row.compiler_version}; profiler {row.profiler_version}; "
        f"flow run `{row.flow_run_id}`; row `{row.row_id}`",
        "",
        "| artifact | sha256 | uri |",
        "|---|---|---|",
    ]
    for name in SINGLE_ARTIFACTS:
        sha, uri = getattr(row, f"{name}_sha256"), getattr(row, f"{name}_uri")
        if sha:
            lines.append(f"| {name} | `{sha[:16]}` | {uri} |")
    for group, refs in (("input", row.inputs), ("output", row.outputs)):
        for ref in refs or []:
            lines.append(f"| {group} {ref['name']} | `{ref['sha256'][:16]}` | {ref['uri']} |")
    create_markdown_artifact(
        key=artifact_key("lineage", row.kernel, row.shape, row.dtype, row.platform),
        markdown="\n".join(lines),
        description=f"lineage of {row.kernel} {row.shape} {row.dtype} {row.platform}",
    )


def summary_artifact(sweep_name: str, rows: list[RowSummary]) -> None:
    create_table_artifact(
        key=artifact_key("sweep", sweep_name), table=[asdict(row) for row in rows], description=f"sweep {sweep_name}"
    )


def asset_key(uri: str) -> str:
    """Asset keys are URIs without spaces, brackets or quotes (Prefect refuses them)."""
    return _RESTRICTED_ASSET_CHARS.sub("-", uri)[:512]


def results_asset_keys(results_uri: str, platforms: list[str], run_date: date, flow_run_id: str) -> list[str]:
    """The Parquet objects this run will write, known before the write so the task can declare them."""
    uris = planned_uris(results_uri, platforms, run_date, flow_run_id)
    return [asset_key(uri if is_s3_uri(uri) else "file://" + str(Path(uri).resolve())) for uri in uris]


def upstream_asset_keys(rows: list[Row]) -> list[str]:
    """Each row's NEFF and profile: the artifacts its numbers stand on."""
    keys = {uri for row in rows for uri in (row.neff_uri, row.profile_uri) if uri}
    return sorted(asset_key(k) for k in keys)
