"""A kernel block's `search` table: how many configurations to try per shape, and what to minimise."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Objective = Literal["median", "p90", "p99", "min"]
OBJECTIVE_COLUMNS: dict[str, str] = {
    "median": "latency_median_us",
    "p90": "latency_p90_us",
    "p99": "latency_p99_us",
    "min": "latency_min_us",
}


class SearchSettings(BaseModel):
    """Search the kernel's tunables for the fastest configuration of each shape the block picks."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "10" is not 10

    budget: int = Field(ge=1, le=10_000, description="Configurations measured per shape (each is one row).")
    objective: Objective = Field("median", description="What to minimise: the latency median, p90, p99 or min.")
    sampler: Literal["tpe", "random"] = Field(
        "tpe", description="tpe: Optuna's Tree-structured Parzen Estimator; random: uniform (a baseline)."
    )
    seed: int = Field(0, ge=0, description="The sampler's seed: the same seed proposes the same configurations.")
    batch: int | None = Field(
        None, ge=1, le=256, description="Trials measured at once per shape; empty: the host's compile slots."
    )
    startup_trials: int = Field(
        4,
        ge=1,
        le=1000,
        description="tpe: random configurations before the model proposes (Optuna's n_startup_trials).",
    )

    warm_start: int = Field(
        2,
        ge=0,
        le=100,
        description="Configurations tried first from the tuned store: the stored bests (and runners-up) of this "
        "kernel at the nearest shapes, any SDK; 0: start cold. They count toward the budget.",
    )

    @property
    def column(self) -> str:
        return OBJECTIVE_COLUMNS[self.objective]
