"""One sweep spread over a fleet: the shard plan, and what each shard left in the dataset.

A NEFF is compiled for one target, so a shard holds points of one platform family only and runs on
a host of that family. Each family's points are cut into even shards of at most
`max_points_per_flow_run`, numbered across the whole fleet run so every shard's flow run name is
unique. What a shard achieved is read back from the results dataset itself (its flow run id names
its objects), not from Prefect's bookkeeping: the summary shows what a reader of the data will see.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from kernelsweep.errors import UsageError
from kernelsweep.locations import Location
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.results import reader
from kernelsweep.spec import Point, SweepSpec

POOL_PREFIX = "kernelsweep-"  # every pool the fleet uses; deployments/prefect.yaml names them so


def pool_name(family: str) -> str:
    """The work pool of one instance family (or of the control hosts: `pool_name("control")`)."""
    return f"{POOL_PREFIX}{family}"


def shard_deployment(family: str) -> str:
    """The deployment a fleet run submits a family's shards to (flow `sweep-shard`, one per family)."""
    return f"sweep-shard/{family}"


def refuse_searches(spec: SweepSpec, source: str) -> None:
    """The fleet shards fixed points; a search's next trials depend on its last ones, and its study is
    one process's journal, so a spec with a search would have its searches silently left out."""
    searching = [i for i, block in enumerate(spec.kernels) if block.search is not None]
    if searching:
        raise UsageError(
            f"{source}: kernels[{searching[0]}] has a search block, which the fleet cannot shard; "
            "run it on one host with `kernelsweep run`, or remove `search` for the fleet"
        )


@dataclass(frozen=True)
class Shard:
    index: int  # across the fleet run: 0 .. shards-1
    family: str
    points: list[Point]


def plan_shards(points: Iterable[Point], max_points: int) -> list[Shard]:
    """Group by platform (in trn1, trn2, inf2 order), then cut each group into even slices."""
    by_family: dict[str, list[Point]] = {}
    for point in points:
        by_family.setdefault(point.platform, []).append(point)
    shards: list[Shard] = []
    for family in sorted(by_family, key=PLATFORM_NAMES.index):
        group = by_family[family]
        size = math.ceil(len(group) / math.ceil(len(group) / max_points))
        for start in range(0, len(group), size):
            shards.append(Shard(len(shards), family, group[start : start + size]))
    return shards


@dataclass(frozen=True)
class ShardData:
    """The rows and objects one shard flow run wrote (a re-run attempt's rows count once)."""

    ok: int = 0
    failed: int = 0
    objects: list[str] = field(default_factory=list)


def shard_data(results_uri: Location | str, flow_run_ids: Iterable[str], since: date) -> dict[str, ShardData]:
    """Per flow run id, from the objects under `results_uri` dated `since` or later (shards run after
    their fleet run started, so older partitions are never listed)."""
    ids = set(flow_run_ids)
    data = reader.dataset(results_uri, filters=[("run_date", ">=", since)])
    objects: dict[str, list[str]] = {}
    for fragment in data.get_fragments():
        run_id = fragment.path.rsplit("/", 1)[-1].split(".", 1)[0]
        if run_id in ids:
            objects.setdefault(run_id, []).append(fragment.path)
    statuses: dict[str, dict[str, str]] = {}
    if objects:
        table = data.to_table(columns=["flow_run_id", "row_id", "status"])
        for run_id, row_id, status in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
            if run_id in ids:
                statuses.setdefault(run_id, {})[row_id] = status
    found = {}
    for run_id in ids:
        rows = statuses.get(run_id, {}).values()
        ok = sum(status == "ok" for status in rows)
        found[run_id] = ShardData(ok=ok, failed=len(rows) - ok, objects=sorted(objects.get(run_id, [])))
    return found
