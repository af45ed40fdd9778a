"""Is a kernel's output right? Compared with the float64 reference under per-dtype tolerances.

A wrong output is a verdict, not a footnote: the row of a point that fails this check has status
`incorrect` (error stage `check`) and the message below, so no report or comparison takes its
latency for a result (public reports show kernels silently returning zeros after an SDK update).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kernelsweep.dtypes import TOLERANCES

_TINY = 1e-12


@dataclass(frozen=True)
class Correctness:
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    passed: bool
    bad_fraction: float = 0.0  # share of output elements outside tolerance
    problem: str = ""  # what is wrong in words ("all zeros against a non-zero reference", ...)

    def message(self) -> str:
        """One line for the row's error_message: what is wrong and by how much."""
        what = f"{self.problem}: " if self.problem else ""
        return (
            f"output outside tolerance: {what}{self.bad_fraction:.1%} of elements beyond "
            f"atol {self.atol:g} + rtol {self.rtol:g} x |reference|; max abs error {self.max_abs_error:.3g}, "
            f"max rel error {self.max_rel_error:.3g}"
        )


def check_outputs(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], dtype: str) -> Correctness:
    """Pass when every element satisfies |a - r| <= atol + rtol * |r| (numpy.isclose's rule)."""
    tol = TOLERANCES[dtype]
    max_abs = max_rel = 0.0
    bad = total = 0
    problems: list[str] = []
    for name, reference in expected.items():
        got = np.asarray(actual[name], dtype=np.float64)
        ref = np.asarray(reference, dtype=np.float64)
        if got.shape != ref.shape:
            problem = f"{name} has shape {got.shape}, the reference {ref.shape}"
            return Correctness(float("inf"), float("inf"), tol.atol, tol.rtol, False, 1.0, problem)
        diff = np.abs(got - ref)
        diff[~np.isfinite(diff)] = np.inf  # a NaN output is infinitely wrong, never silently skipped
        wrong = diff > tol.atol + tol.rtol * np.abs(ref)
        bad, total = bad + int(wrong.sum()), total + ref.size
        max_abs = max(max_abs, float(diff.max(initial=0.0)))
        max_rel = max(max_rel, float((diff / (np.abs(ref) + _TINY)).max(initial=0.0)))
        if wrong.any():
            problems.append(_problem(name, got, ref))
    fraction = bad / total if total else 0.0
    return Correctness(max_abs, max_rel, tol.atol, tol.rtol, bad == 0, fraction, "; ".join(p for p in problems if p))


def _problem(name: str, got: np.ndarray, ref: np.ndarray) -> str:
    """The failure patterns worth naming: all zeros, NaN or infinite values."""
    nonzero_reference = bool(np.any(ref != 0))
    if np.isnan(got).all():
        return f"{name} is all NaN"
    if nonzero_reference and not np.any(got):
        return f"{name} is all zeros against a non-zero reference"
    if np.isnan(got).any() or np.isinf(got).any():
        return f"{name} has NaN or infinite values"
    return ""
