"""The nightly re-check of the tuned store, as the fleet run's last step (kernelsweep.tuned.nightly says
what it re-checks and when it is off).

Its contests and re-tunes are ordinary runs of the `sweep/<platform>` deployment, each on one host of
the platform's family from the run's queue, waited for in turn: a contest needs both configurations in
one run on one device, and a re-tune is a search, which runs in one flow run (its winner confirmed by
contests on that host). What it found goes into the fleet run's log; the store's entries keep it, and
the report's "tuned store" section shows what changed and why. A re-check that fails (a host gone, a
store that cannot be read) is a warning: the night's sweep is done by then and stands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import get_run_logger
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment

from kernelsweep.errors import KernelsweepError
from kernelsweep.results import SweepOutcome
from kernelsweep.sweepspec import SweepSpec
from kernelsweep.tuned.nightly import recheck_spec
from kernelsweep.tuned.store import TunedStore

if TYPE_CHECKING:
    from kernelsweep.tuned.contest import Runner
    from kernelsweep.tuned.recheck import Outcome


def nightly_recheck(spec: SweepSpec, run: Runner) -> Outcome | None:
    """Re-check the stored bests of the spec's kernels when `recheck_tuned` asks; None when nothing ran."""
    if spec.recheck_tuned is None:
        return None
    log = get_run_logger()
    try:
        checked = recheck_spec(spec, TunedStore(spec.results_location).entries())
        if checked is None:
            log.info("tuned store: no stored best of %s's kernels and platforms, nothing to re-check", spec.name)
            return None
        # the re-check judges with the report's statistics (scipy): loaded only on a night that re-checks,
        # never by every fleet flow run's start (tests/test_fleet_plan.py)
        from kernelsweep.tuned.recheck import recheck

        outcome = recheck(checked, run)
    except KernelsweepError as exc:
        log.warning("tuned store not re-checked: %s", exc.message)
        return None
    for line in [*outcome.lines(), *(f"skipped: {s}" for s in outcome.skipped), outcome.summary()]:
        log.info("tuned store: %s", line)
    return outcome


def on_family_hosts(queue: str) -> Runner:
    """A runner that runs each one-platform spec as a `sweep/<platform>` deployment run, waited for."""

    def run(spec: SweepSpec) -> SweepOutcome:
        [platform] = spec.platforms
        parameters = {"spec": spec.model_dump(mode="json")}
        done = run_deployment(name=f"sweep/{platform}", parameters=parameters, timeout=None, work_queue_name=queue)
        assert isinstance(done, FlowRun)  # called from a sync flow: Prefect runs it to completion, not a coroutine
        if done.state is None or not done.state.is_completed():
            said = done.state.message if done.state is not None else "no state"
            raise KernelsweepError(f"{spec.name} on {platform} (flow run {done.id}) did not complete: {said}")
        return SweepOutcome(flow_run_id=str(done.id))

    return run
