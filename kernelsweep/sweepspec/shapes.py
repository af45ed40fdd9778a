"""The numeric order of shape strings (`M=2,N=128`), for every table and chart that lists shapes.

A shape is text in a row (`Point.shape`), and text sorts `n=16384` before `n=2048`; people reading a
sweep expect the axes' numbers in order. The run summary, the report and compare all sort by these keys.
"""

from __future__ import annotations


def shape_order(shape: str) -> tuple[tuple[str, float], ...]:
    """A shape's sort key by its axes' numbers (`M=2` before `M=128`), not its string."""
    parts = []
    for term in shape.split(","):
        axis, _, value = term.partition("=")
        try:
            parts.append((axis, float(value)))
        except ValueError:
            parts.append((f"{axis}={value}", 0.0))
    return tuple(parts)


def natural_order(key: tuple[str, ...]) -> tuple[tuple[tuple[str, float], ...], ...]:
    """A series key (or any tuple of names and shapes) with its shapes in numeric order."""
    return tuple(shape_order(part) if "=" in part else ((part, 0.0),) for part in key)
