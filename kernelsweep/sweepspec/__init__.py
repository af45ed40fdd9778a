"""The sweep file and its points: the spec's models, how a spec expands into points, and the point itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.sweepspec.expansion import DEFAULT_MAX_POINTS, Expansion, count_points, expand, expand_spec
    from kernelsweep.sweepspec.load import load_spec, parse_spec
    from kernelsweep.sweepspec.models import SweepSpec
    from kernelsweep.sweepspec.point import Point
    from kernelsweep.sweepspec.shapes import natural_order, shape_order

__all__ = [
    "DEFAULT_MAX_POINTS",
    "Expansion",
    "Point",
    "SweepSpec",
    "count_points",
    "expand",
    "expand_spec",
    "load_spec",
    "natural_order",
    "parse_spec",
    "shape_order",
]
__getattr__ = public_face(__name__, __file__)
