"""The `report` flow: the same report as `kernelsweep report`, published in the Prefect UI.

Its artifacts have fixed keys, so the UI keeps each one's history across runs: `report-summary`
(latest result per point), `report-regressions` (every step slower, with its cause),
`report-failures`, and `report-html`, a link to the HTML report and charts stored next to the
results under `reports/<flow run id>/`. deployments/report-deployment.yaml runs it whenever a sweep
or fleet run completes.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_link_artifact, create_table_artifact
from prefect.runtime import flow_run

from kernelsweep.platforms import PlatformName
from kernelsweep.report.html import bundle
from kernelsweep.report.load import Selection
from kernelsweep.report.publish import browser_link, report_location, write_bundle
from kernelsweep.report.stats import DEFAULT_ALPHA
from kernelsweep.report.summary import build_report

KEYS = {
    "summary": "report-summary",
    "regressions": "report-regressions",
    "failures": "report-failures",
    "html": "report-html",
}


@flow(name="report", flow_run_name="report")
def report(
    results: str = "results",
    kernels: list[str] | None = None,
    platforms: list[PlatformName] | None = None,
    dtypes: list[str] | None = None,
    sweeps: list[str] | None = None,
    days: int | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> str:
    """Summarise a results dataset, track regressions, and store the HTML report next to it.

    Args:
        results: Results folder or s3://bucket/prefix, as the sweeps wrote it.
        kernels: Only these kernels (all when empty).
        platforms: Only these platforms (all when empty).
        dtypes: Only these dtypes (all when empty).
        sweeps: Only rows of these sweep names (all when empty).
        days: Only runs of the last N days, today included (all history when empty).
        alpha: Family-wise false-alarm rate of the regression verdicts (docs/reports.md).

    Returns:
        Where the HTML report was stored.
    """
    selection = Selection(
        kernels=tuple(kernels or ()),
        platforms=tuple(platforms or ()),
        dtypes=tuple(dtypes or ()),
        sweeps=tuple(sweeps or ()),
        days=days,
    )
    built = build_report(results, selection, alpha)
    page = write_bundle(bundle(built), report_location(results, str(flow_run.id)))
    scope = f"{results} ({selection.describe()})"
    create_table_artifact(key=KEYS["summary"], table=built.summary_rows(), description=f"latest per point: {scope}")
    create_table_artifact(
        key=KEYS["regressions"], table=built.regression_rows(), description=f"steps slower, with causes: {scope}"
    )
    create_table_artifact(key=KEYS["failures"], table=built.failure_rows(), description=f"failed points: {scope}")
    create_link_artifact(
        key=KEYS["html"], link=browser_link(page), link_text="kernelsweep report (HTML)", description=page
    )
    get_run_logger().info(
        "%d points, %d failed, %d regression step(s); report at %s",
        len(built.latest),
        len(built.failed),
        len(built.regressions),
        page,
    )
    return page
