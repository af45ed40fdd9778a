"""Reading a profile: the profiler's files and their schemas, one normalised metrics record, which engine
bounds a point, and where in the kernel's source its time goes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.profiles.bounding import bounding_engine
    from kernelsweep.profiles.metrics import METRIC_FIELDS, LatencyStats, ProfileMetrics, read_profile
    from kernelsweep.profiles.schema import SummarySchema

__all__ = ["LatencyStats", "METRIC_FIELDS", "ProfileMetrics", "SummarySchema", "bounding_engine", "read_profile"]
__getattr__ = public_face(__name__, __file__)
