"""The `report` flow: the same report as `kernelsweep report`, published in the Prefect UI.

Its artifacts have fixed keys, so the UI keeps each one's history across runs: `report-summary`
(latest result per point), `report-regressions` (every step slower, with its cause),
`report-failures`, `report-best` (the best configuration per shape; empty unless rows carry tunables),
`report-tuned` (the tuned store's replaced bests: was, now, when and the verdict's reasons; empty while
none was replaced), `report-cost` (after a fleet run: its Neuron- and CPU-host-hours and on-demand cost), and
`results-site` (the results site, kernelsweep.site, rebuilt here for the kernels whose rows changed, under
`<results>/site/`), `report-html`, a link a browser opens (kernelsweep.report.publish.browser_link) to the HTML report
stored next to the results under `reports/<flow run id>/`. Reports older than `keep_days` are deleted
there. Its deployment (deployments/prefect.yaml) runs it whenever a sweep, fleet run or tuned re-check
completes, on the results that run wrote. A sweep run that is a step of another flow run (a search's
contests, a re-check's contests and re-tunes) gets no report of its own: the run it belongs to gets one
when it ends, and a report per step would repeat it, notices and all.

Each regression's triage status (acknowledged, fixed: `kernelsweep triage`, kept in the results'
`_triage/` folder) is read with the rows, beside the `acknowledged` TOML file's entries.

It also emits a Prefect event per open regression and one for the night (kernelsweep.report.notify),
which the automation `kernelsweep fleet up --notify BLOCK` installs sends to people.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

from prefect import flow, get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun
from prefect.events import emit_event
from prefect.runtime import flow_run
from prefect.settings import PREFECT_UI_URL

from kernelsweep.bisect.store import finished_steps
from kernelsweep.errors import KernelsweepError
from kernelsweep.flows.fleet.bisect_trigger import steps_being_bisected
from kernelsweep.flows.fleet.summary import fleet_cost
from kernelsweep.flows.settings import prices_from_env, reports_url_from_env, site_url_from_env
from kernelsweep.platforms import PlatformName
from kernelsweep.report import Report, Selection, build_report, prune_reports
from kernelsweep.report.acknowledge import load_acknowledged
from kernelsweep.report.html import bundle
from kernelsweep.report.notify import BISECTS_PER_NIGHT, notices
from kernelsweep.report.publish import browser_link, report_location, write_bundle
from kernelsweep.report.stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD, Rule
from kernelsweep.site import build_site, site_link

KEYS = {
    "summary": "report-summary",
    "regressions": "report-regressions",
    "failures": "report-failures",
    "html": "report-html",
    "best": "report-best",
    "tuned": "report-tuned",
    "cost": "report-cost",
    "site": "results-site",
}


@flow(name="report", flow_run_name="report")
def report(
    results_uri: str = "results",
    after_flow_run: str | None = None,
    kernels: list[str] | None = None,
    platforms: list[PlatformName] | None = None,
    dtypes: list[str] | None = None,
    sweeps: list[str] | None = None,
    days: int | None = None,
    alpha: float = DEFAULT_ALPHA,
    threshold: float = DEFAULT_THRESHOLD,
    acknowledged: str | None = None,
    keep_days: int | None = 30,
    site: bool = True,
    bisects_per_night: int = BISECTS_PER_NIGHT,
) -> str | None:
    """Summarise a results dataset, track regressions, and store the HTML report next to it.

    Args:
        results_uri: Results folder or s3://bucket/prefix, as the sweeps wrote it.
        after_flow_run: The sweep, fleet run or re-check this report follows (`prefect.flow-run.<id>`, as
            its deployment trigger passes it): the report covers the results that run wrote; none when
            that run is a step of another flow run.
        kernels: Only these kernels (all when empty).
        platforms: Only these platforms (all when empty).
        dtypes: Only these dtypes (all when empty).
        sweeps: Only rows of these sweep names (all when empty).
        days: Only runs of the last N days, today included (all history when empty).
        alpha: Error level of each step's verdict; intervals are 1 - 2 alpha (docs/reports.md).
        threshold: The smallest change that matters, as a fraction (0.02 = 2%).
        acknowledged: Path of a TOML file of accepted steps (series, night, reason) on the worker.
        keep_days: Delete report pages under the results' reports/ older than this many days (empty: keep all).
        site: Also rebuild the results site under the results' site/ (only kernels whose rows changed).
        bisects_per_night: Start at most this many bisect flows (the open steps not bisected yet and
            with no bisect flow under way, oldest first); the night's summary names the steps left,
            "not bisected: cap reached", and those under way, "being bisected".

    Returns:
        Where the HTML report was stored; None when `after_flow_run` is a step of another flow run.
    """
    tupled = (tuple(kernels or ()), tuple(platforms or ()), tuple(dtypes or ()), tuple(sweeps or ()))
    selection = Selection(kernels=tupled[0], platforms=tupled[1], dtypes=tupled[2], sweeps=tupled[3], days=days)
    if after_flow_run:
        followed = _flow_run_of(after_flow_run)
        if followed.parent_task_run_id is not None:
            get_run_logger().info(
                "no report after %s: a step of another flow run, reported when that ends", followed.name
            )
            return None
        spec = followed.parameters.get("spec")
        results_uri = (spec.get("results") if isinstance(spec, dict) else None) or results_uri
    accepted = load_acknowledged(Path(acknowledged)) if acknowledged else []
    built = build_report(results_uri, selection, Rule(threshold=threshold, alpha=alpha), accepted)
    page = write_bundle(bundle(built), report_location(results_uri, str(flow_run.id)))
    link = browser_link(page, reports_url_from_env())
    _publish(built, link, page, f"{results_uri} ({selection.describe()})")
    _publish_cost(after_flow_run)
    site_link = _publish_site(results_uri, built) if site else None
    for notice in notices(built, link, site_link, bisects_per_night, _bisected(results_uri), _being_bisected()):
        emit_event(event=notice.event, resource=notice.resource, payload=notice.payload)
        if notice.payload.get("being_bisected"):
            under_way = "; ".join(map(str, notice.payload["being_bisected"]))  # type: ignore[call-overload]
            get_run_logger().info("not asked for again, being bisected: %s", under_way)
        if notice.payload.get("not_bisected"):
            capped = "; ".join(map(str, notice.payload["not_bisected"]))  # type: ignore[call-overload]
            get_run_logger().warning("not bisected: cap reached (%d a night): %s", bisects_per_night, capped)
    counts = (len(built.latest), len(built.failed), len(built.incorrect), len(built.regressions))
    get_run_logger().info("%d points, %d failed, %d incorrect, %d regression step(s); report at %s", *counts, link)
    if keep_days is not None:
        _prune(results_uri, keep_days)
    return page


def _bisected(results_uri: str) -> set[str]:
    """The steps whose bisection has an outcome; none when their journals cannot be read (a warning: the
    report and its notices still go out, and the steps are asked for again)."""
    try:
        return finished_steps(results_uri)
    except KernelsweepError as exc:
        get_run_logger().warning("the bisections' journals were not read: %s", exc.message)
        return set()


def _being_bisected() -> set[str]:
    """The steps whose bisect flow is still under way (scheduled, retrying, running), as the server has them."""
    with get_client(sync_client=True) as client:
        return steps_being_bisected(client)


def _publish_site(results_uri: str, built: Report) -> str | None:
    """The results site rebuilt beside the results and its link as the `results-site` artifact; a site
    that cannot be built is a warning: the report and its notices still go out."""
    try:
        ui = PREFECT_UI_URL.value()
        made = build_site(results_uri, rule=built.rule, acknowledged=list(built.triage.acknowledged), prefect_ui=ui)
    except KernelsweepError as exc:
        get_run_logger().warning("the results site was not rebuilt: %s", exc.message)
        return None
    link = site_link(made.location, site_url_from_env())
    described = f"{made.location}: {len(made.rebuilt)} kernel(s) rebuilt, {len(made.kept)} unchanged"
    create_link_artifact(key=KEYS["site"], link=link, link_text="kernelsweep results site", description=described)
    return link


def _prune(results_uri: str, keep_days: int) -> None:
    """Report pages older than `keep_days` (kernelsweep.report.retention); never this run's."""
    pruned = prune_reports(results_uri, keep_days, datetime.now(UTC), spare=str(flow_run.id))
    if pruned:
        get_run_logger().info("deleted %d report(s) older than %d days", len(pruned), keep_days)


def _publish(built: Report, link: str, page: str, scope: str) -> None:
    """The report's artifacts, under fixed keys so the UI keeps each one's history."""
    create_table_artifact(key=KEYS["summary"], table=built.summary_rows(), description=f"latest per point: {scope}")
    create_table_artifact(
        key=KEYS["regressions"], table=built.regression_rows(), description=f"steps slower, with causes: {scope}"
    )
    create_table_artifact(key=KEYS["failures"], table=built.failure_rows(), description=f"failed points: {scope}")
    create_table_artifact(
        key=KEYS["best"], table=built.best_rows(), description=f"best configuration per shape: {scope}"
    )
    create_table_artifact(
        key=KEYS["tuned"], table=built.tuned_rows(), description=f"tuned store: bests replaced, newest first: {scope}"
    )
    create_link_artifact(key=KEYS["html"], link=link, link_text="kernelsweep report (HTML)", description=page)


def _publish_cost(resource_id: str | None) -> None:
    """After a fleet run: what it cost (kernelsweep.fleet.cost), Neuron-host-hours and CPU-host-hours per
    run and per 1,000 points and at on-demand prices, as the `report-cost` artifact."""
    if not resource_id:
        return
    with get_client(sync_client=True) as client:
        cost = fleet_cost(client, UUID(resource_id.removeprefix("prefect.flow-run.")))
    if cost is not None:
        table = "\n".join(cost.lines(prices_from_env()))
        create_markdown_artifact(key=KEYS["cost"], markdown=table, description="what the fleet run cost")


def _flow_run_of(resource_id: str) -> FlowRun:
    """The flow run behind a `prefect.flow-run.<id>` event resource."""
    with get_client(sync_client=True) as client:
        return client.read_flow_run(UUID(resource_id.removeprefix("prefect.flow-run.")))
