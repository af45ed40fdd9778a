from datetime import date

from prefect import task

from kernelsweep.results.writer import write_results
from tasks.policy import STAGE_TASK_OPTIONS


@task(name="store", **STAGE_TASK_OPTIONS, retries=2, retry_delay_seconds=[1, 5])
def store_task(rows: list[dict], results: str, flow_run_id: str, run_date: date, lineage: dict) -> list[str]:
    """Write the run's rows as Parquet; rewriting the same run is idempotent."""
    return write_results(rows, results, flow_run_id=flow_run_id, run_date=run_date, lineage=lineage)
