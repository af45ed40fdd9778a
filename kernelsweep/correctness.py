"""Is a kernel's output right? Compared with the float64 reference under per-dtype tolerances."""

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


def check_outputs(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], dtype: str) -> Correctness:
    """Pass when every element satisfies |a - r| <= atol + rtol * |r| (numpy.isclose's rule)."""
    tol = TOLERANCES[dtype]
    max_abs = max_rel = 0.0
    passed = True
    for name, reference in expected.items():
        got = np.asarray(actual[name], dtype=np.float64)
        ref = np.asarray(reference, dtype=np.float64)
        if got.shape != ref.shape:
            return Correctness(float("inf"), float("inf"), tol.atol, tol.rtol, False)
        diff = np.abs(got - ref)
        finite = bool(np.all(np.isfinite(got)))
        max_abs = max(max_abs, float(diff.max(initial=0.0)))
        max_rel = max(max_rel, float((diff / (np.abs(ref) + _TINY)).max(initial=0.0)))
        passed = passed and finite and bool(np.all(diff <= tol.atol + tol.rtol * np.abs(ref)))
    return Correctness(max_abs, max_rel, tol.atol, tol.rtol, passed)
