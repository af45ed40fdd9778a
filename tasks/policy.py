"""Retry policy shared by the stage tasks: retry transient failures only.

The decision reads `retryable` off the raised KernelsweepError (set once, where the tool's output
was classified); a deterministic failure such as a compiler diagnostic fails the task at once.
"""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import State
from prefect.tasks import Task, exponential_backoff

TRANSIENT_RETRIES = 4
RETRY_DELAYS = exponential_backoff(backoff_factor=1)
RETRY_JITTER_FACTOR = 0.5

# Stage results are in-memory references and tasks never re-use a result across runs through
# Prefect; content-addressed caching is the artifact store's job.
STAGE_TASK_OPTIONS: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False}


def retry_if_transient(task: Task, task_run: TaskRun, state: State) -> bool:
    error = state.result(raise_on_failure=False)
    return bool(getattr(error, "retryable", False))


def transient_retries() -> dict[str, Any]:
    return {
        "retries": TRANSIENT_RETRIES,
        "retry_delay_seconds": RETRY_DELAYS,
        "retry_jitter_factor": RETRY_JITTER_FACTOR,
        "retry_condition_fn": retry_if_transient,
    }
