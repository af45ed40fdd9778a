"""A regression's status as the site shows it: the one place the site reads triage.

The report already folds every recorded decision (kernelsweep.report.triage: `kernelsweep triage`'s
changes and the --acknowledged file) into its states, so the site takes the state from the report
and the note from the decision that holds.
"""

from __future__ import annotations

from kernelsweep.report.regress import Step
from kernelsweep.report.summary import Report


def status(report: Report, step: Step) -> tuple[str, str | None]:
    """(state, note): the step's state and what a person said about it (a reason, the fixing change)."""
    decided = report.status(step)
    if decided is None:
        return report.state(step), None
    said = [t for t in (decided.reason, f"fixed by {decided.fixed_by}" if decided.fixed_by else None) if t]
    return decided.status, "; ".join(said) or None
