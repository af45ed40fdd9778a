"""Values for the simulated NKI language: numpy views of tensors, reads that refuse unwritten memory,
and writes that mark what they wrote.

Imported only when a trace computes values (a test running a kernel on numbers); the simulated tools
themselves trace shapes only and never import numpy for it. Engines compute in float32, as the
hardware does, and cast on write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernelsweep.sim.nki.tensor import NkiError, NkiTensor


def _view(tensor: NkiTensor, flat: Any) -> Any:
    strides = tuple(s * flat.itemsize for s in tensor.strides)
    return np.lib.stride_tricks.as_strided(flat[tensor.offset :], tensor.shape, strides, writeable=True)


def read(tensor: NkiTensor, what: str) -> Any:
    """The tensor's values as float32; reading memory nothing has written is the kernel's bug."""
    storage = tensor.storage
    if not _view(tensor, storage.written).all():
        raise NkiError(f"{what} reads {tensor!r} before every element of it was written")
    return _view(tensor, storage.data).astype(np.float32)


def write(tensor: NkiTensor, values: Any) -> None:
    """Cast to the tensor's dtype and store; the written mask records every element."""
    storage = tensor.storage
    _view(tensor, storage.data)[...] = np.asarray(values, dtype=np.float32).reshape(tensor.shape)
    _view(tensor, storage.written)[...] = True


def accumulated(tensor: NkiTensor) -> Any:
    return _view(tensor, tensor.storage.accumulated)


def fill(tensor: NkiTensor, array: Any) -> None:
    """An input's bytes, as the runtime hands them to the kernel."""
    storage = tensor.storage
    storage.data[...] = np.asarray(array).astype(storage.data.dtype).reshape(-1)
    storage.written[...] = True


def result(tensor: NkiTensor) -> tuple[Any, Any]:
    """(values in the tensor's dtype, written mask), shaped as the tensor."""
    return _view(tensor, tensor.storage.data).copy(), _view(tensor, tensor.storage.written).copy()


def as_matrix(values: Any) -> Any:
    """Partition dimension by the flattened free dimensions, as the engines see a tile."""
    return values.reshape(values.shape[0], -1)


OPS: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "exp": np.exp,
    "tanh": np.tanh,
    "copy": lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "square": np.square,
    "sqrt": np.sqrt,
    "reciprocal": lambda x: 1 / x,
}


def apply(op: str, *args: Any) -> Any:
    try:
        function = OPS[op]
    except KeyError:
        raise NkiError(f"the simulated NKI interpreter has no numeric model of nl.{op}") from None
    return function(*args)
