"""One point of a sweep: kernel x parameters x dtype x platform (x LNC, tunables, toolchain), one result row.

Apart from the spec's models (kernelsweep.sweepspec.models) because far more code needs a point than a spec: the
stages, the row, the baselines, the fleet's shards and the simulator take one. Its id is part of every
result row and journal, so `point_id` must never change for an existing point.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelsweep import names
from kernelsweep.platforms import get_platform


class StrictModel(BaseModel):
    """Unknown keys refused; and strict types: `num_exec = "10"` or `n = [true]` is a mistake to name,
    not a value to coerce (a quoted number is often a typo for something else)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DropBar(StrictModel):
    """A search trial's bar: after its first `after` captures, a trial whose latencies lie clearly above
    the best so far's (kernelsweep.search.dropping, by the verdict rule at `threshold` and `alpha`) is not
    captured further."""

    after: int = Field(ge=1)
    best_us: list[float] = Field(min_length=1)  # the best trial so far: its captures' latencies
    best: str  # its tunables, for the row's reader and the log
    threshold: float
    alpha: float


class Point(StrictModel):
    """One kernel x parameters x dtype x platform (x LNC, tunables, toolchain): one result row."""

    sweep: str
    kernel: str
    kernel_ref: str
    params: dict[str, int]
    dtype: str
    platform: str
    lnc: int
    seed: int
    tunables: dict[str, int | str] = Field(default_factory=dict)  # the NKI kernel's tunables, when set
    toolchain_name: str = ""  # one of the spec's [toolchains], "" when it names none
    search_trial: int | None = None  # the search's trial number, for a point a search proposed
    # A search trial's captures (its effort's, else the run's capture.repeats) and when it may stop
    # early; neither is part of the point's id: a trial is the same point however hard it is measured.
    repeats: int | None = None
    drop: DropBar | None = None
    baseline: str = ""  # the kernel block's baseline (kernelsweep.baselines), on its points and the baseline's
    baseline_of: str = ""  # on a baseline's point: the kernel it is measured against
    # The keys of params, then of tunables, in the kernel's order. A point's JSON stored where objects
    # lose their key order (a Prefect server on PostgreSQL keeps a shard's parameters as jsonb, which
    # sorts keys by length) gets its order back from this list, so its shape string and id are the same
    # whichever server passed it on. Filled from the dicts' own order when absent.
    axis_order: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _keep_axis_order(cls, data: object) -> object:
        if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
            return data
        params, tunables = data["params"], data.get("tunables") or {}
        order = data.get("axis_order")
        if not isinstance(order, list) or sorted(map(str, order)) != sorted([*params, *tunables]):
            order = [*params, *tunables]  # absent, or not this point's keys: the dicts' own order
        rank = {key: i for i, key in enumerate(order)}
        ordered = {
            "params": dict(sorted(params.items(), key=lambda kv: rank[kv[0]])),
            "tunables": dict(sorted(tunables.items(), key=lambda kv: rank[kv[0]])),
        }
        return {**data, **ordered, "axis_order": order}

    @property
    def shape(self) -> str:
        """Canonical shape string, e.g. `b=1,s=128,h=1024,i=512`, in the kernel's axis order."""
        return ",".join(f"{k}={v}" for k, v in self.params.items())

    @property
    def tunables_text(self) -> str:
        """Canonical tunables string, e.g. `tile_m=128,loop_order=mn`, in the kernel's order; "" for none."""
        return ",".join(f"{k}={v}" for k, v in self.tunables.items())

    @property
    def variant(self) -> str:
        """What sets this point apart from the platform's default run of its shape: an LNC other than the
        platform's default, tunables, a named toolchain ("" for none, so older ids stay as they were)."""
        parts = [f"lnc{self.lnc}"] if self.lnc != get_platform(self.platform).default_lnc else []
        parts += [self.tunables_text] if self.tunables else []
        parts += [f"tc-{self.toolchain_name}"] if self.toolchain_name else []
        return "-".join(parts)

    @property
    def point_id(self) -> str:
        raw = f"{self.kernel}-{self.shape}-{self.dtype}-{self.platform}"
        return names.slug(f"{raw}-{self.variant}" if self.variant else raw)
