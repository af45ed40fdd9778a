"""Where bytes are kept: result and artifact locations (a folder or S3), the content-addressed artifact
store, the trace and compile caches in it, and the probe that proves a location writable first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.stores.artifacts import ArtifactRef, ArtifactStore, open_artifact_store, open_store_for
    from kernelsweep.stores.locations import LocalFolder, Location, absolute_uri, parse_location
    from kernelsweep.stores.probe import probe_location
    from kernelsweep.stores.s3 import S3Location

__all__ = [
    "ArtifactRef",
    "ArtifactStore",
    "LocalFolder",
    "Location",
    "S3Location",
    "absolute_uri",
    "open_artifact_store",
    "open_store_for",
    "parse_location",
    "probe_location",
]
__getattr__ = public_face(__name__, __file__)
