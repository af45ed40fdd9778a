from datetime import date

from prefect.assets import materialize

from kernelsweep.results import Row, write_results
from kernelsweep.stores import Location
from kernelsweep.tasks.policy import STAGE_TASK_OPTIONS, transient_retries

RESULTS_ASSET = "kernelsweep://results"  # replaced per run by the Parquet objects' own keys


@materialize(RESULTS_ASSET, name="store", **STAGE_TASK_OPTIONS, **transient_retries())
def store_task(rows: list[Row], results: Location, flow_run_id: str, run_date: date, lineage: dict) -> list[str]:
    """Write the run's rows as Parquet; a retried write of the same run is idempotent, S3 access errors fail at once.

    Run it `with_options(assets=..., asset_deps=...)` so each object is an asset materialised from its
    points' NEFFs and profiles.
    """
    return write_results(rows, results, flow_run_id=flow_run_id, run_date=run_date, lineage=lineage)
