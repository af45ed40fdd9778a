"""What a report tells the people who did not open it: one notice per open regression and one for the night.

The report flow emits each notice as a Prefect event (kernelsweep.flows.report), and the automation
`kernelsweep fleet up --notify BLOCK` installs sends each event through a notification block (a
webhook, Slack, email: any Prefect notification block). Every notice carries its finished subject
and body, so the automation's templates only place them; the other payload fields are there for
automations of one's own (say, only regressions above 10%).

An open regression (kernelsweep.report.summary: no later step undid it, nobody acknowledged it) is
announced by every report until it is acknowledged, marked fixed (kernelsweep.report.triage) or undone:
a reminder each night, not once.

An open regression whose compiler changed also asks for a bisection (`STEP_EVENT`, its request in the
payload: kernelsweep.bisect.request), which the fleet's automation turns into a bisect flow on the
point's family; no person reads that event, and the flow's own (`BISECT_EVENT`) is sent like a notice.
At most `bisects` such requests a report (the report flow's `bisects_per_night`, default
`BISECTS_PER_NIGHT`): each is a flow holding a host of the family for many runs, and a night whose SDK
bump slows many points would otherwise fill the pool with bisections. A step whose bisection has an
outcome (kernelsweep.bisect.store.finished_steps) is not asked for again, and the steps still waiting
take their turns oldest first: first found, first bisected, so a step over the cap one night is asked
for on a later one however many newer steps keep coming. The steps beyond the cap are not dropped
silently: the night's summary names them, "not bisected: cap reached". Nor is a step whose bisect flow
is still under way (`being_bisected`, kernelsweep.flows.fleet.bisect_trigger.steps_being_bisected)
asked for again, which would start a second flow on the same question: the summary names it "being
bisected", and it takes no turn of the cap.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernelsweep.bisect.request import FAMILY_LABEL, STEP_EVENT, request_of
from kernelsweep.names import slug

if TYPE_CHECKING:  # the fleet flow imports the event names alone; the report's modules load scipy
    from kernelsweep.report.summary import Report

REGRESSION_EVENT = "kernelsweep.regression"
BISECT_EVENT = "kernelsweep.bisect.done"  # a bisect flow's culprit (kernelsweep.flows.bisect), told the same way
SUMMARY_EVENT = "kernelsweep.report.summary"
RESOURCE_PREFIX = "kernelsweep."  # every notice's resource id starts so (the automation matches it)
BISECTS_PER_NIGHT = 2  # bisect flows a report starts at most (its oldest open steps first)


@dataclass(frozen=True)
class Notice:
    event: str
    resource: dict[str, str]
    payload: dict[str, object] = field(default_factory=dict)


def notices(
    report: Report,
    link: str,
    site: str | None = None,
    bisects: int = BISECTS_PER_NIGHT,
    bisected: Collection[str] = frozenset(),
    being_bisected: Collection[str] = frozenset(),
) -> list[Notice]:
    """One per open regression, newest first, then the night's summary (with the results site's link,
    the steps whose bisection is under way and those left unbisected by the cap), then a bisect request
    per open regression a bisection can act on (kernelsweep.bisect.request) that has neither an answer
    (`bisected`) nor a flow under way (`being_bisected`), both sets of steps' keys, the `bisects`
    oldest of them."""
    rows = report.regression_rows(report.open_regressions)
    found = [_regression(row, link) for row in rows]
    steps = zip(rows, report.open_regressions, strict=True)
    asked = [n for row, step in steps if (n := _step_found(row, step.changes, report.results_uri)) is not None]
    unanswered = [n for n in asked if n.payload["key"] not in bisected]
    under_way = [n for n in unanswered if n.payload["key"] in being_bisected]
    left = (n for n in unanswered if n.payload["key"] not in being_bisected)
    waiting = sorted(left, key=lambda n: str(n.payload["night"]))
    skipped = {"being_bisected": _names(under_way), "not_bisected": _names(waiting[bisects:])}
    return [*found, _summary(report, link, len(found), site, skipped, bisects), *waiting[:bisects]]


def _names(steps: list[Notice]) -> list[str]:
    return [str(n.resource["prefect.resource.name"]) for n in steps]


def _step_found(row: Mapping[str, object], changes: dict, results: str) -> Notice | None:
    """The event that starts a bisect flow on the point's family (the automation `fleet up` installs).
    Reports send it while the step is open and its bisection has no outcome (a crashed one resumes)."""
    request = request_of(row, changes, results)
    if request is None:
        return None
    resource = {
        "prefect.resource.id": f"{RESOURCE_PREFIX}step.{slug(request.series)}",
        "prefect.resource.name": request.series,
        FAMILY_LABEL: request.platform,
        "kernelsweep.night": request.night,
    }
    return Notice(STEP_EVENT, resource, {"request": request.as_json(), "key": request.key, "night": request.night})


def _regression(row: Mapping[str, object], link: str) -> Notice:
    series = " ".join(str(row[k]) for k in ("kernel", "shape", "dtype", "platform"))
    subject = f"kernelsweep regression: {series} {row['change_percent']}% slower since {row['night']}"
    body = (
        f"{series}: {row['before_us']} us -> {row['after_us']} us ({row['change_percent']}% slower, interval "
        f"{row['ci_low_percent']}% to {row['ci_high_percent']}%, {row['runs']} runs) since the night of "
        f"{row['night']}; cause: {row['cause']}. Report: {link}"
    )
    resource = {
        "prefect.resource.id": f"{RESOURCE_PREFIX}series.{slug(series)}",
        "prefect.resource.name": series,
        "kernelsweep.night": str(row["night"]),
    }
    return Notice(REGRESSION_EVENT, resource, {**row, "subject": subject, "body": body, "link": link})


def _summary(
    report: Report, link: str, regressions: int, site: str | None, skipped: dict[str, list[str]], bisects: int
) -> Notice:
    counts = {
        "points": len(report.latest),
        "failed": len(report.failed),
        "incorrect": len(report.incorrect),
        "open_regressions": regressions,
    }
    subject = (
        f"kernelsweep report: {counts['points']} points, {counts['failed']} failed, {regressions} open regressions"
    )
    body = (
        f"{report.results_uri} ({report.selection.describe()}): {counts['points']} points, {counts['failed']} failed, "
        f"{counts['incorrect']} incorrect, {regressions} open regression(s). Report: {link}"
        + (f" Results site: {site}" if site else "")
        + (f" Being bisected: {'; '.join(skipped['being_bisected'])}." if skipped["being_bisected"] else "")
        + (
            f" Not bisected: cap reached ({bisects} a night): {'; '.join(skipped['not_bisected'])}."
            if skipped["not_bisected"]
            else ""
        )
    )
    resource = {"prefect.resource.id": f"{RESOURCE_PREFIX}results.{slug(report.results_uri)[:200]}"}
    payload: dict[str, object] = {**counts, "subject": subject, "body": body, "link": link, "site": site}
    payload.update(skipped)
    return Notice(SUMMARY_EVENT, resource, payload)
