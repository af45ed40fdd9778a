"""The fleet's plan, in plain Python: shards per platform family, which SDK each host runs, the compile
farm's split of compiling from capturing, which family this host is, and what a fleet run cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.fleet.cost import RunCost, parse_prices
    from kernelsweep.fleet.farm import family_sdks, prepare_compile, sdk_mismatch
    from kernelsweep.fleet.hosts import HostReport
    from kernelsweep.fleet.plan import (
        FleetSettings,
        Shard,
        ShardData,
        fleet_settings,
        plan_search_shards,
        plan_shards,
        pool_name,
        shard_data,
        shard_deployment,
    )

__all__ = [
    "FleetSettings",
    "HostReport",
    "RunCost",
    "Shard",
    "ShardData",
    "family_sdks",
    "fleet_settings",
    "parse_prices",
    "plan_search_shards",
    "plan_shards",
    "pool_name",
    "prepare_compile",
    "sdk_mismatch",
    "shard_data",
    "shard_deployment",
]
__getattr__ = public_face(__name__, __file__)
