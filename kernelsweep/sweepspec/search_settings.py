"""A kernel block's `search` table: how many configurations to try per shape, how hard to measure each,
and what to minimise."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

Objective = Literal["median", "p90", "p99", "min"]
OBJECTIVE_COLUMNS: dict[str, str] = {
    "median": "latency_median_us",
    "p90": "latency_p90_us",
    "p99": "latency_p99_us",
    "min": "latency_min_us",
}

Effort = Literal["quick", "default", "thorough"]


class EffortLevel(NamedTuple):
    """What an effort level sets when the block does not: trials, captures per trial (None: the spec's
    `capture.repeats`) and the captures after which a clearly losing trial stops (kernelsweep.search.dropping)."""

    budget: int
    repeats: int | None
    drop_after: int


# quick: half the trials, each dropped after 2 of 5 captures when it clearly loses; thorough: three
# times the trials, 9 captures each, none dropped before its third. default is what a search did before
# effort levels existed (16 trials, the spec's repeats); its drop after 2 only acts where the repeats
# can bound the interval (5 or more: kernelsweep.search.dropping.can_decide).
EFFORTS: dict[str, EffortLevel] = {
    "quick": EffortLevel(budget=8, repeats=5, drop_after=2),
    "default": EffortLevel(budget=16, repeats=None, drop_after=2),
    "thorough": EffortLevel(budget=48, repeats=9, drop_after=3),
}


class SearchSettings(BaseModel):
    """Search the kernel's tunables for the fastest configuration of each shape the block picks."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "10" is not 10

    effort: Effort = Field(
        "default",
        description="quick: 8 trials of 5 captures; default: 16 trials of the spec's repeats; thorough: 48 trials "
        "of 9 captures. Sets budget, repeats and drop_after where they are not given.",
    )
    budget: int = Field(
        ge=1, le=10_000, description="Configurations measured per shape (each is one row); empty: the effort's."
    )
    repeats: int | None = Field(
        None, ge=1, le=100, description="Captures per trial; empty: the effort's (default: the spec's capture.repeats)."
    )
    drop_after: int = Field(
        ge=0,
        le=100,
        description="A trial whose first this many captures lie clearly above the best so far (the verdict rule) "
        "is not captured further: its row has fewer repeats; 0: never drop; empty: the effort's.",
    )
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

    @model_validator(mode="before")
    @classmethod
    def _effort_fills_the_rest(cls, data: Any) -> Any:
        """budget, repeats and drop_after default to the effort's (the spec's own values win)."""
        if not isinstance(data, dict):
            return data
        level = EFFORTS.get(data.get("effort", "default"))
        if level is None:  # the field's own check names the allowed levels
            return data
        defaults = {"budget": level.budget, "repeats": level.repeats, "drop_after": level.drop_after}
        return {**defaults, **{k: v for k, v in data.items() if not (k in defaults and v is None)}}

    @property
    def column(self) -> str:
        return OBJECTIVE_COLUMNS[self.objective]
