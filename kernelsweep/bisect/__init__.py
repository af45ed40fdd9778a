"""Bisection to the culprit: which SDK build or kernel commit made a point slower (docs/bisect.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.bisect.axis import builds_axis, commits_axis
    from kernelsweep.bisect.run import Question, bisect
    from kernelsweep.bisect.text import lines

__all__ = ["Question", "bisect", "builds_axis", "commits_axis", "lines"]
__getattr__ = public_face(__name__, __file__)
