"""The `tuned-recheck` flow (`kernelsweep tuned recheck`): the re-check on a new SDK
(kernelsweep.tuned.recheck), its contests and re-tunes each a `sweep` subflow run."""

from __future__ import annotations

from prefect import flow

from kernelsweep.flows.sweep import sweep
from kernelsweep.sweepspec import SweepSpec
from kernelsweep.tuned.recheck import Outcome, recheck


@flow(name="tuned-recheck", flow_run_name="tuned-recheck-{spec.name}")
def recheck_flow(spec: SweepSpec) -> Outcome:
    return recheck(spec, sweep)
