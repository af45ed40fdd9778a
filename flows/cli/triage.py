"""`kernelsweep triage ack|fix|reopen|list`: set and read each regression's status, kept in the results
(`<results>/_triage/changes.json`, kernelsweep.report.triage), honoured by `report`."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from kernelsweep.errors import UsageError
from kernelsweep.flows.cli.output import console, out
from kernelsweep.flows.cli.report import _table as table
from kernelsweep.flows.cli.report import rule_from, selection_from, selection_options, status_cell
from kernelsweep.report import Report, strict_json
from kernelsweep.report.regress import Step
from kernelsweep.report.triage import ACKNOWLEDGED, FIXED, OPEN, Change, Regression

_DATE = click.DateTime(formats=["%Y-%m-%d"])


def _which(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that name regressions (beside --kernel, --platform, --dtype) and the rule that finds them."""
    options = [
        selection_options,
        click.option("--shape", "shapes", multiple=True, help="Only this shape, as the results spell it (repeatable)."),
        click.option("--variant", help="Only this variant (lnc=1, tunables, toolchain=NAME), as the report shows it."),
        click.option("--night", type=_DATE, help="Only the step first seen on this night (YYYY-MM-DD)."),
        click.option(
            "--acknowledged",
            type=click.Path(dir_okay=False, path_type=Path),
            help="The TOML file of accepted steps `report --acknowledged` reads, if you use one.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _decision(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        _which,
        click.option("--link", help="The ticket, pull request or release note (an http(s) URL)."),
        click.option("--by", default=None, help="Who decides (default: user@host)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.group()
def triage() -> None:
    """Each regression's status: acknowledged (a reason, a link), fixed (by a named change), or reopened.

    Acknowledged and fixed regressions no longer fail `report`; every change is kept with who made it
    and when, in the results (docs/reports.md, "Triage").
    """


@triage.command()
@_decision
@click.option("--reason", required=True, help="Why the slowdown is accepted or being handled (one line).")
def ack(**options: Any) -> None:
    """Acknowledge the regressions the options name: they stop failing the report, shown with the reason."""
    _act(ACKNOWLEDGED, **options)


@triage.command()
@_decision
@click.option("--change", "fixed_by", required=True, help="The change that fixes it: a commit, or an SDK version.")
@click.option("--reason", help="A note beside the change (one line).")
def fix(**options: Any) -> None:
    """Mark the regressions the options name fixed by a change: they stop failing the report."""
    _act(FIXED, **options)


@triage.command()
@_decision
@click.option("--reason", help="Why it is open again (one line).")
def reopen(**options: Any) -> None:
    """Take back an acknowledgement or a fix: the regression is judged by the data again (open, recovered)."""
    _act(OPEN, **options)


@triage.command(name="list")
@_which
@click.option("--history", is_flag=True, help="Also every recorded change, oldest first, with who and when.")
def list_statuses(history: bool, output_format: str, **options: Any) -> None:
    """Every regression and drift the report finds, with its state and status (`--history`: every change)."""
    from kernelsweep.report import formats

    built, found = _found(**options)
    rows = [_row(built, step, drift) for step, drift in found]
    changes = [c.to_json() for c in built.triage.changes]
    if output_format == "json":
        print(strict_json.dumps({"regressions": rows, "changes": changes if history else []}, indent=1))
        return
    if output_format == "markdown":
        print(
            "\n".join(formats.markdown_table(list(rows[0]), [list(r.values()) for r in rows]) if rows else ["(none)"])
        )
    else:
        shown = [{**r, "state": status_cell(r)} for r in rows]
        drop = ("reason", "fixed_by", "triaged_at", *(("kind",) if all(r["kind"] == "step" for r in rows) else ()))
        out.print(table("Regressions and their status", shown, drop) if rows else "No regression.", highlight=False)
    if history:
        for change in built.triage.changes:
            what = "; ".join(r.describe() for r in change.regressions)
            extra = " ".join(f"{k}={v}" for k, v in (("reason", change.reason), ("link", change.link),
                                                   ("fixed_by", change.fixed_by)) if v)  # fmt: skip
            out.print(escape(f"{change.at} {change.by} {change.status}: {what} {extra}".rstrip()), highlight=False)
    console.print(f"{len(rows)} regression(s); statuses from {escape(built.triage.source)}", highlight=False)


def _act(
    status: str,
    reason: str | None,
    link: str | None,
    by: str | None,
    fixed_by: str | None = None,
    **options: Any,
) -> None:
    """Check the decision, find the regressions it names, and append it to the triage file."""
    from kernelsweep.report.acknowledge import link_problem
    from kernelsweep.report.triage import record

    for name, text in (("--reason", reason), ("--change", fixed_by), ("--by", by)):
        if text is not None and (not text.strip() or "\n" in text):
            raise UsageError(f"{name} {text!r}: give one non-empty line")
    problem = link_problem(link)
    if problem:
        raise UsageError(f"--link {problem}")
    if not (options["kernels"] or options["shapes"] or options["variant"] or options["night"]):
        raise UsageError(
            "name the regression(s): give --kernel, --shape, --variant or --night (`kernelsweep triage list`)"
        )
    output_format = options.pop("output_format")
    built, found = _found(**options)
    if status == OPEN:
        found = [(s, drift) for s, drift in found if built.status(s) is not None]
    if not found:
        wanted = "acknowledged or fixed regression" if status == OPEN else "regression"
        raise UsageError(
            f"no {wanted} in {built.results_uri} matches the options given; `kernelsweep triage list` shows them"
        )
    at = datetime.now(UTC).isoformat(timespec="seconds")
    who = by or f"{getpass.getuser()}@{socket.gethostname()}"
    regressions = tuple(Regression.of(step, drift) for step, drift in found)
    change = Change(at, who, status, regressions, reason, link, fixed_by)
    where = record(built.results_uri, change)
    if output_format == "json":  # the change as recorded
        print(strict_json.dumps(change.to_json(), indent=1))
    for regression in regressions if output_format != "json" else ():
        out.print(escape(f"{status}: {regression.describe()}"), highlight=False, soft_wrap=True)
    console.print(f"{len(regressions)} regression(s) {status}; recorded in {escape(where)}", highlight=False)


def _found(
    results_uri: str,
    alpha: float,
    thresholds: tuple[str, ...],
    correction: str,
    shapes: tuple[str, ...],
    variant: str | None,
    night: datetime | None,
    acknowledged: Path | None,
    **filters: Any,
) -> tuple[Report, list[tuple[Step, bool]]]:
    """The report's regressions (steps slower, blips included) and drifts that match the options."""
    from kernelsweep.report import build_report
    from kernelsweep.report.acknowledge import load_acknowledged

    rule = rule_from(alpha, thresholds, correction)
    accepted = load_acknowledged(acknowledged) if acknowledged else []
    built = build_report(results_uri, selection_from(**filters), rule, accepted)
    on: date | None = night.date() if night else None
    candidates = [(s, False) for s in built.regressions] + [(s, True) for s in built.drifts]
    return built, [
        (s, drift)
        for s, drift in candidates
        if (not shapes or s.series[1] in shapes)
        and (variant is None or s.series[4] == variant)
        and (on is None or (not drift and s.first_after.run_date == on))
    ]


def _row(built: Report, step: Step, drift: bool) -> dict[str, Any]:
    [cells] = built.regression_rows([step])
    keep = ("kernel", "shape", "variant", "dtype", "platform", "night", "change_percent", "state", "age_nights",
            "reason", "link", "fixed_by", "triaged_by", "triaged_at")  # fmt: skip
    return {"kind": "drift" if drift else "step", **{k: cells[k] for k in keep if k in cells}}
