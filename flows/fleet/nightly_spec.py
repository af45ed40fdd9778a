"""The nightly spec as it is when the night's fleet run starts, not as it was at the last `fleet up`.

`kernelsweep fleet up` stores the nightly spec as a Prefect variable, and the deployments take their
default `spec` from it; but Prefect fills that default in at deploy time, so an edit of the variable
(in the UI's Variables page, or `prefect variable set`) changed nothing until `fleet up` ran again.
The nightly schedule on `fleet/fleet` therefore passes the variable's name (`spec_variable`), and the
fleet flow reads the spec from it here, as it starts: an edit applies at the next night. The run is
renamed after the spec it actually runs. A variable that is gone or holds no valid spec fails the run
with one line naming the variable and the fix, before anything is submitted.
"""

from __future__ import annotations

from uuid import UUID

from prefect import get_client, get_run_logger
from prefect.runtime import flow_run
from prefect.variables import Variable

from kernelsweep.errors import UsageError
from kernelsweep.sweepspec import SweepSpec, parse_spec


def live_spec(given: SweepSpec, variable: str) -> SweepSpec:
    """`given`, unless `variable` names the Prefect variable to read the spec from now."""
    if not variable:
        return given
    value = Variable.get(variable)
    if value is None:
        raise UsageError(f"variable {variable} does not exist; run `kernelsweep fleet up` to store the nightly spec")
    if not isinstance(value, dict):
        raise UsageError(f"variable {variable} holds a {type(value).__name__}, not a spec; run `kernelsweep fleet up`")
    spec = parse_spec(value, source=f"variable {variable}")
    get_run_logger().info("running the spec %s read from variable %s as this run started", spec.name, variable)
    if spec.name != given.name:
        with get_client(sync_client=True) as client:
            client.update_flow_run(UUID(str(flow_run.id)), name=f"fleet-{spec.name}")
    return spec
