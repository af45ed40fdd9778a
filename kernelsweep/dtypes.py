"""Element types a sweep may ask for, and how close a result must be to count as correct.

numpy has no bfloat16; ml_dtypes supplies one with the same bit layout the hardware uses, so the
`.bin` inputs we write are byte-for-byte what a NEFF expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    import numpy as np

DtypeName = Literal["float32", "bfloat16", "float16"]
DTYPE_NAMES: tuple[str, ...] = get_args(DtypeName)


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


# Loose enough for reduced-precision accumulation order on the device, tight enough to catch a
# wrong tile or a transposed operand (those give O(1) errors).
TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(atol=1e-4, rtol=1e-3),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=5e-2, rtol=5e-2),
}


# Bytes per element, known without numpy: the simulated tools that only size tensors stay lean.
ITEMSIZE: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}


def numpy_dtype(name: str) -> np.dtype:
    # Deferred: numpy + ml_dtypes cost ~120 ms, which a tool call that only sizes tensors never needs.
    import ml_dtypes
    import numpy as np

    if name == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    if name in DTYPE_NAMES:
        return np.dtype(name)
    raise KeyError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_NAMES)}")


def itemsize(name: str) -> int:
    try:
        return ITEMSIZE[name]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_NAMES)}") from None
