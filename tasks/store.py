from datetime import date

from prefect import task

from kernelsweep.results.writer import write_results
from tasks.policy import STAGE_TASK_OPTIONS, transient_retries


@task(name="store", **STAGE_TASK_OPTIONS, **transient_retries())
def store_task(rows: list[dict], results: str, flow_run_id: str, run_date: date, lineage: dict) -> list[str]:
    """Write the run's rows as Parquet; a retried write of the same run is idempotent, S3 access errors fail at once."""
    return write_results(rows, results, flow_run_id=flow_run_id, run_date=run_date, lineage=lineage)
