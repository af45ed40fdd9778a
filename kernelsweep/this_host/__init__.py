"""This host as the stages see it: which platform family it is, the stage context set up on it (toolchain,
artifact store, NeuronCore leases, compile slots), and one context per named toolchain it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.this_host.context import Locations, StageContext, prepare, resolve_toolchain
    from kernelsweep.this_host.family import HostPlatform, family_of
    from kernelsweep.this_host.named_toolchains import prepare_toolchains

__all__ = [
    "HostPlatform",
    "Locations",
    "StageContext",
    "family_of",
    "prepare",
    "prepare_toolchains",
    "resolve_toolchain",
]
__getattr__ = public_face(__name__, __file__)
