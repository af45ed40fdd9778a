"""One sweep spread over a fleet: the shard plan, and what each shard left in the dataset.

A NEFF is compiled for one target, so a shard holds points of one platform family only and runs on
a host of that family. Each family's points are cut into even shards of at most
`max_points_per_flow_run`, numbered across the whole fleet run so every shard's flow run name is
unique. A spec's searches add K search shards per family, each running all of the family's searched
shapes on shared studies. What a shard achieved is read back from the results dataset itself (its
flow run id names its objects), not from Prefect's bookkeeping: the summary shows what a reader of
the data will see.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kernelsweep.errors import UsageError
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.results.journal import run_key
from kernelsweep.stores.locations import LocalFolder, Location, parse_location
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.load import FLEET_TABLE
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point

POOL_PREFIX = "kernelsweep-"  # every pool the fleet uses; deployments/prefect.yaml names them so
FLEET_DEPLOYMENT = "fleet/fleet"  # the one deployment the nightly schedule is on
# The Prefect variable `fleet up` stores the nightly spec in; the nightly run reads it as it starts.
NIGHTLY_VARIABLE = "kernelsweep_nightly_spec"
NIGHTLY_CRON, NIGHTLY_TIMEZONE = "0 2 * * *", "UTC"
QUEUES = {"urgent": 1, "nightly": 2}  # each pool's work queues and their priority (1 is served first)


@dataclass(frozen=True)
class FleetSettings:
    """The `[fleet]` table of the nightly spec file: when the nightly fleet run starts. A sweep never
    reads it (kernelsweep.sweepspec.load.load_spec drops it); `kernelsweep fleet up --cron/--timezone` override it."""

    cron: str = NIGHTLY_CRON
    timezone: str = NIGHTLY_TIMEZONE

    def override(self, cron: str | None, timezone: str | None) -> FleetSettings:
        settings = FleetSettings(cron or self.cron, timezone or self.timezone)
        settings.check("--timezone" if timezone else "[fleet] timezone")
        return settings

    def check(self, where: str) -> None:
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise UsageError(f"{where}: unknown time zone {self.timezone!r}; use an IANA name like UTC") from None


def fleet_settings(spec_path: str | Path) -> FleetSettings:
    """The spec file's `[fleet]` table (the file itself is checked by kernelsweep.sweepspec.load.load_spec)."""
    try:
        table = tomllib.loads(Path(spec_path).read_text()).get(FLEET_TABLE, {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return FleetSettings()  # load_spec reports the file's own problem, in its words
    unknown = set(table) - {"cron", "timezone"} if isinstance(table, dict) else {"(not a table)"}
    if unknown:
        raise UsageError(f"{spec_path}: [fleet] takes cron and timezone, not {', '.join(sorted(unknown))}")
    settings = FleetSettings(str(table.get("cron", NIGHTLY_CRON)), str(table.get("timezone", NIGHTLY_TIMEZONE)))
    settings.check(f"{spec_path}: [fleet] timezone")
    return settings


def pool_name(family: str) -> str:
    """The work pool of one instance family (or of the control hosts: `pool_name("control")`)."""
    return f"{POOL_PREFIX}{family}"


def shard_deployment(family: str) -> str:
    """The deployment a fleet run submits a family's shards to (flow `sweep-shard`, one per family)."""
    return f"sweep-shard/{family}"


def shard_journal_key(spec: SweepSpec, fleet_run_id: str, shard: int) -> str:
    """The journal of one shard of one fleet run: every attempt of the shard (a retry on another host
    of the family) finds the points the earlier ones finished there."""
    return run_key(spec, scope=f"fleet-{fleet_run_id}-shard-{shard}")


@dataclass(frozen=True)
class Shard:
    index: int  # across the fleet run: 0 .. shards-1
    family: str
    points: list[Point]  # a search shard's: the searched shapes (points without tunables), not trials
    search: bool = False


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


def plan_search_shards(targets: Iterable[SearchTarget], max_trials: int, first: int) -> list[Shard]:
    """A family's searches as K shards, each running every searched shape of the family on the fleet
    run's shared studies and asking them for trials until the budgets are used: K = the family's
    budgets over `max_trials` (at least 1), so the trials spread over up to K hosts at once. Numbered
    from `first`, after the grid's shards."""
    by_family: dict[str, list[SearchTarget]] = {}
    for target in targets:
        by_family.setdefault(target.point.platform, []).append(target)
    shards: list[Shard] = []
    for family in sorted(by_family, key=PLATFORM_NAMES.index):
        group = by_family[family]
        count = math.ceil(sum(t.settings.budget for t in group) / max_trials)
        for _ in range(count):
            shards.append(Shard(first + len(shards), family, [t.point for t in group], search=True))
    return shards


@dataclass(frozen=True)
class ShardData:
    """The rows and objects one shard flow run wrote (a re-run attempt's rows count once)."""

    ok: int = 0
    failed: int = 0
    objects: list[str] = field(default_factory=list)


def shard_data(results_uri: Location | str, flow_run_ids: Iterable[str], since: date) -> dict[str, ShardData]:
    """Per flow run id, from the rows under `results_uri` dated `since` or later (shards run after
    their fleet run started, so older partitions are never listed). Rows are counted by their
    `flow_run_id`, so a partition compacted since (kernelsweep.results.compact) still counts; its
    objects are named after the run only until then."""
    # here, not at the top: the dataset reader (pyarrow.dataset, pandas) is the fleet flow's, and every
    # shard's flow-run process imports this module for its names only
    from kernelsweep.results import reader

    ids = set(flow_run_ids)
    where = parse_location(results_uri, "results location")
    if isinstance(where, LocalFolder) and not where.path.is_dir():  # nothing was ever written there
        return {run_id: ShardData() for run_id in ids}
    dated = [("run_date", ">=", since)]
    objects: dict[str, list[str]] = {}
    for fragment in reader.dataset(results_uri, filters=dated).get_fragments():
        run_id = fragment.path.rsplit("/", 1)[-1].split(".", 1)[0]
        if run_id in ids:
            objects.setdefault(run_id, []).append(fragment.path)
    mine = [*dated, ("flow_run_id", "in", sorted(ids))]
    rows = reader.read(results_uri, filters=mine, columns=["flow_run_id", "status"]).to_pylist() if ids else []
    counts: dict[str, list[str]] = {}
    for row in rows:
        counts.setdefault(row["flow_run_id"], []).append(row["status"])
    found = {}
    for run_id in ids:
        statuses = counts.get(run_id, [])
        ok = sum(status == "ok" for status in statuses)
        found[run_id] = ShardData(ok=ok, failed=len(statuses) - ok, objects=sorted(objects.get(run_id, [])))
    return found
