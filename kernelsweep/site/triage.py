"""A regression's status as the site shows it: the one place the site reads triage.

Today the report's own states (kernelsweep.report.summary.Report.state: open, acknowledged,
recovered, blip) and the acknowledged file's reason. A triage store that records more (who, a
link, the change that fixed it) is read here and nowhere else in the site.
"""

from __future__ import annotations

from kernelsweep.report.acknowledge import reason_for
from kernelsweep.report.regress import Step
from kernelsweep.report.summary import Report


def status(report: Report, step: Step) -> tuple[str, str | None]:
    """(state, note): the step's state and what a person said about it (an acknowledgement's reason)."""
    return report.state(step), reason_for(step, report.acknowledged)
