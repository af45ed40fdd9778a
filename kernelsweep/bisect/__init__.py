"""Bisection to the culprit: which SDK build or kernel commit made a point slower (docs/bisect.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.bisect.axis import builds_axis, commits_axis, sdks_axis
    from kernelsweep.bisect.run import Both, Question, bisect, bisect_both
    from kernelsweep.bisect.sdk_folder import sdk_environments
    from kernelsweep.bisect.text import both_lines, lines

__all__ = [
    "Both",
    "Question",
    "bisect",
    "bisect_both",
    "both_lines",
    "builds_axis",
    "commits_axis",
    "lines",
    "sdk_environments",
    "sdks_axis",
]
__getattr__ = public_face(__name__, __file__)
