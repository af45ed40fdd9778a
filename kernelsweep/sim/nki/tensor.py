"""The simulated NKI tensor: a view (shape, offset, strides) of one allocation in one buffer.

It models what the simulated tracer must know about an `NkiTensor`: its shape, dtype and buffer,
indexing as the documented `__getitem__` does it (on-chip tensors keep the partition dimension on
an integer index, HBM tensors drop it), `reshape` of a contiguous view, and no arithmetic operators
(NKI's tensor type defines none). With values switched on (`Storage.values`) each allocation also
holds a numpy array and a written mask, so an interpreter can compute a kernel's output and see
which elements it never wrote; without, no numpy is imported.
"""

from __future__ import annotations

import math
from typing import Any

from kernelsweep.sim.nki.errors import NkiError
from kernelsweep.sim.nki.generations import Generation

ON_CHIP = ("sbuf", "psum")
HBM = ("hbm", "private_hbm", "shared_hbm")


class Storage:
    """One allocation; `data`/`written`/`accumulated` exist only when values are computed."""

    __slots__ = ("shape", "dtype", "buffer", "name", "generation", "data", "written", "accumulated")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: str,
        buffer: str,
        name: str = "",
        values: bool = False,
        generation: Generation | None = None,  # the NKI release tracing it: some bugs depend on it
    ):
        self.shape, self.dtype, self.buffer, self.name, self.generation = shape, dtype, buffer, name, generation
        self.data: Any = None
        self.written: Any = None
        self.accumulated: Any = None
        if values:
            import numpy as np

            size = math.prod(shape)
            self.data = np.full(size, np.nan, dtype=np_dtype(dtype)) if _is_float(dtype) else np.zeros(size)
            self.written = np.zeros(size, dtype=bool)
            self.accumulated = np.zeros(size, dtype=bool)


_EXTRA_DTYPES = ("int32", "uint8", "int8", "uint32")


def np_dtype(name: str) -> Any:
    """numpy's dtype for an NKI element type; numpy is imported only by a trace that computes values."""
    if name in _EXTRA_DTYPES:
        import numpy as np

        return np.dtype(name)
    from kernelsweep.dtypes import numpy_dtype

    return numpy_dtype(name)


def _is_float(dtype: str) -> bool:
    return "float" in dtype


class NkiTensor:
    """A view of a Storage. The class name is NKI's, so Python's own errors read as they would there."""

    __slots__ = ("storage", "shape", "offset", "strides")

    def __init__(self, storage: Storage, shape: tuple[int, ...], offset: int = 0, strides: tuple[int, ...] = ()):
        self.storage, self.shape, self.offset = storage, shape, offset
        self.strides = strides or _contiguous(shape)

    @property
    def dtype(self) -> str:
        return self.storage.dtype

    @property
    def buffer(self) -> str:
        return self.storage.buffer

    @property
    def on_chip(self) -> bool:
        return self.storage.buffer in ON_CHIP

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def partitions(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def free_size(self) -> int:
        return math.prod(self.shape[1:])

    def __repr__(self) -> str:
        return f"NkiTensor(shape={self.shape}, dtype={self.dtype}, buffer={self.buffer})"

    def __getitem__(self, key: Any) -> NkiTensor:
        if type(key) is tuple and len(key) == len(self.shape):
            view = self._in_bounds_slices(key)
            if view is not None:
                return view
        return self._indexed(key)

    def _in_bounds_slices(self, keys: tuple[Any, ...]) -> NkiTensor | None:
        """The view for one step-less, in-bounds, non-empty slice per axis (what tiled kernels index
        with, hundreds of thousands of times a trace), else None for `_indexed` to check and explain."""
        shape, offset = [], self.offset
        for k, size, stride in zip(keys, self.shape, self.strides):  # noqa: B905 - lengths checked by the caller
            if type(k) is not slice or k.step is not None:
                return None
            start = 0 if k.start is None else k.start
            stop = size if k.stop is None else k.stop
            if type(start) is not int or type(stop) is not int or not 0 <= start < stop <= size:
                return None
            offset += start * stride
            shape.append(stop - start)
        return NkiTensor(self.storage, tuple(shape), offset, self.strides)

    def _indexed(self, key: Any) -> NkiTensor:
        keys = list(key) if isinstance(key, tuple) else [key]
        if Ellipsis in keys:
            at = keys.index(Ellipsis)
            keys[at : at + 1] = [slice(None)] * (len(self.shape) - len(keys) + 1)
        if len(keys) > len(self.shape):
            raise NkiError(f"too many indices for a tensor of shape {self.shape}: {key!r}")
        keys += [slice(None)] * (len(self.shape) - len(keys))
        shape, strides, offset = [], [], self.offset
        for axis, (k, size, stride) in enumerate(zip(keys, self.shape, self.strides, strict=True)):
            if isinstance(k, DynSlice):
                k = slice(k.start, k.start + k.size)
            if isinstance(k, int):
                index = k + size if k < 0 else k
                if not 0 <= index < size:
                    raise NkiError(f"index {k} is out of bounds for axis {axis} with size {size}")
                offset += index * stride
                if axis == 0 and self.on_chip:  # the partition dimension stays, with size 1
                    shape.append(1)
                    strides.append(stride)
                continue
            if not isinstance(k, slice):
                raise NkiError(f"unsupported index {k!r}: use ints, slices, nl.ds or ...")
            start, stop, step = k.indices(size)
            if (k.start is not None and not -size <= k.start <= size) or (k.stop is not None and k.stop > size):
                raise NkiError(f"slice {k.start}:{k.stop} is out of bounds for axis {axis} with size {size}")
            if step <= 0:
                raise NkiError(f"slice step {step} on axis {axis}: only positive steps are supported")
            count = max(0, -(-(stop - start) // step))
            if count == 0:
                raise NkiError(f"slice {k.start}:{k.stop} of axis {axis} (size {size}) selects nothing")
            offset += start * stride
            shape.append(count)
            strides.append(stride * step)
        return NkiTensor(self.storage, tuple(shape), offset, tuple(strides))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NkiError("assigning into a tensor is not modelled: write it with nisa.tensor_copy or nisa.dma_copy")

    def reshape(self, shape: tuple[int, ...]) -> NkiTensor:
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) != self.size:
            raise NkiError(f"cannot reshape a tensor of shape {self.shape} into {shape}: element counts differ")
        if self.buffer in ("shared_hbm", "private_hbm") and shape[0] != self.shape[0]:
            generation = self.storage.generation
            if generation is not None and generation.shared_hbm_reshape_broken:
                raise NkiError(
                    f"reshape of a {self.buffer} tensor {self.shape} into {shape} fails the partition size check "
                    f"(NKI {generation.name}, SDK {generation.sdk}; fixed in NKI 0.2.0)"
                )
        if self.on_chip and shape[0] != self.shape[0]:
            raise NkiError(f"reshape of an on-chip tensor must keep the partition dimension {self.shape[0]}")
        if self.strides != _contiguous(self.shape):
            raise NkiError(f"cannot reshape a non-contiguous view of shape {self.shape}")
        return NkiTensor(self.storage, shape, self.offset)

    def __iter__(self) -> Any:
        raise TypeError("'NkiTensor' object is not iterable; loop over range(...) and index it")

    def __bool__(self) -> bool:
        raise TypeError("the truth value of an NkiTensor is not known while tracing")


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


class DynSlice:
    """`nl.ds(start, size)`."""

    __slots__ = ("start", "size")

    def __init__(self, start: int, size: int):
        self.start, self.size = int(start), int(size)
