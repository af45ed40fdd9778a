"""Budgeted search over a kernel's tunables, per shape (`search` in a kernel block of the spec)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.search.storage import study_storage
    from kernelsweep.search.study import ShapeSearch

__all__ = ["ShapeSearch", "study_storage"]
__getattr__ = public_face(__name__, __file__)
