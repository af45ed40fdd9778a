"""Lineage in Prefect: a keyed artifact per kernel-shape point, a sweep summary table, and asset keys
for the `@materialize` store task.

Keyed artifacts are versioned by Prefect, so `lineage-<kernel>-<shape>-<platform>` shows one
point's history across every run in the UI. The rows themselves carry the same lineage, since the
open-source server keeps asset events but draws no asset graph.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from kernelsweep.results.writer import object_key
from kernelsweep.s3 import is_s3_uri, parse_s3_uri

ARTIFACT_KEY_LIMIT = 200  # Prefect artifact keys: [a-z0-9-]; keep them readable in the UI
_RESTRICTED_ASSET_CHARS = re.compile(r"[\s#?&%\"'<>\[\]{}|\\^`]")
TABLE_COLUMNS = (
    "kernel",
    "shape",
    "dtype",
    "platform",
    "status",
    "total_time_us",
    "achieved_tflops",
    "mfu_percent",
    "roofline_percent",
    "correct",
    "error_class",
)


def artifact_key(*parts: str) -> str:
    key = re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
    return key[:ARTIFACT_KEY_LIMIT].rstrip("-")


def point_artifact(row: dict) -> None:
    """The point's artifacts, versions and outcome, under a key stable across runs."""
    lines = [
        f"### {row['kernel']} {row['shape']} {row['dtype']} on {row['platform']}",
        f"status **{row['status']}**"
        + (f" ({row.get('error_class')}: {row.get('error_message')})" if row["status"] != "ok" else ""),
        f"total_time_us {row.get('total_time_us')}; toolchain {row['toolchain']}"
        + (" (simulated)" if row["is_simulation"] else ""),
        f"compiler {row.get('compiler_version')}; profiler {row.get('profiler_version')}; "
        f"flow run `{row['flow_run_id']}`; row `{row['row_id']}`",
        "",
        "| artifact | sha256 | uri |",
        "|---|---|---|",
    ]
    for name in ("kernel_source", "ir", "neff", "ntff", "profile"):
        if row.get(f"{name}_sha256"):
            lines.append(f"| {name} | `{row[f'{name}_sha256'][:16]}` | {row[f'{name}_uri']} |")
    for group in ("inputs", "outputs"):
        for ref in row.get(group) or []:
            lines.append(f"| {group[:-1]} {ref['name']} | `{ref['sha256'][:16]}` | {ref['uri']} |")
    create_markdown_artifact(
        key=artifact_key("lineage", row["kernel"], row["shape"], row["dtype"], row["platform"]),
        markdown="\n".join(lines),
        description=f"lineage of {row['kernel']} {row['shape']} {row['dtype']} {row['platform']}",
    )


def summary_artifact(sweep_name: str, rows: list[dict]) -> None:
    table = [{column: row.get(column) for column in TABLE_COLUMNS} for row in rows]
    create_table_artifact(key=artifact_key("sweep", sweep_name), table=table, description=f"sweep {sweep_name}")


def asset_key(uri: str) -> str:
    """Asset keys are URIs without spaces, brackets or quotes (Prefect refuses them)."""
    return _RESTRICTED_ASSET_CHARS.sub("-", uri)[:512]


def results_asset_keys(results: str, platforms: list[str], run_date: date, flow_run_id: str) -> list[str]:
    """The Parquet objects this run will write, known before the write so the task can declare them."""
    keys = [object_key(p, run_date, flow_run_id) for p in sorted(set(platforms))]
    if is_s3_uri(results):
        where = parse_s3_uri(results)
        return [asset_key(where.uri(where.key(k))) for k in keys]
    return [asset_key("file://" + str(Path(results).resolve() / k)) for k in keys]


def upstream_asset_keys(rows: list[dict]) -> list[str]:
    """Each row's NEFF and profile: the artifacts its numbers stand on."""
    keys = {row[f"{name}_uri"] for row in rows for name in ("neff", "profile") if row.get(f"{name}_uri")}
    return sorted(asset_key(k) for k in keys)
