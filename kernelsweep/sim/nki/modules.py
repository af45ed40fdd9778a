"""The modules a kernel imports from the simulated NKI: `nki.language` and `nki.isa` as one generation
has them, with the 0.3+ (and legacy) `nl.load` / `nl.store` / `nl.copy` ... wrappers built from the
modelled instructions (kernelsweep.sim.nki.lang). A name the generation removed raises the
AttributeError a real import would; a name the model does not know is accepted but unchecked.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from kernelsweep.sim.nki.generations import WRAPPERS, Generation
from kernelsweep.sim.nki.lang import (
    DTYPES,
    ELEMENTWISE,
    ISA,
    MOVING_FMAX,
    PMAX,
    PSUM_BANK_BYTES,
    STATIONARY_FMAX,
    UNARY,
    Op,
    ParDim,
    current,
    dma_copy,
    memset,
    nc_matmul,
    nc_transpose,
    ndarray,
    new_tensor,
    require_tile,
    tensor_copy,
    unmodelled,
)
from kernelsweep.sim.nki.tensor import HBM, DynSlice, NkiError, NkiTensor


def _wrappers(generation: Generation) -> dict[str, Callable[..., Any]]:
    def load(src: NkiTensor, dtype: str | None = None) -> NkiTensor:
        require_tile("nl.load src", src, HBM)
        out = new_tensor(src.shape, dtype or src.dtype, "sbuf")
        dma_copy(out, src)
        return out

    def store(dst: NkiTensor, value: NkiTensor) -> None:
        require_tile("nl.store dst", dst, HBM)
        dma_copy(dst, value)

    def copy(x: NkiTensor, dtype: str | None = None) -> NkiTensor:
        if x.buffer == "psum" and generation.psum_copy_broken:
            raise NkiError(
                f"nl.copy from PSUM: cross-buffer copies (e.g., PSUM to SBUF) are not supported in NKI "
                f"{generation.name} (known issue, fixed in 0.6); use nisa.tensor_copy"
            )
        out = new_tensor(x.shape, dtype or x.dtype, "sbuf")
        tensor_copy(out, x)
        return out

    def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
        stationary = x if transpose_x else transpose(x)
        if not transpose_x:
            stationary = copy(stationary)
        out = new_tensor((stationary.free_size, y.free_size), "float32", "psum")
        nc_matmul(out, stationary, y)
        return out

    def transpose(x: NkiTensor, dtype: str | None = None) -> NkiTensor:
        out = new_tensor((x.free_size, x.partitions), dtype or x.dtype, "psum")
        nc_transpose(out, x)
        return out

    def full(shape: tuple[int, ...], fill_value: float, dtype: str, buffer: str = "sbuf", name: str = "") -> NkiTensor:
        out = ndarray(shape, dtype, buffer, name)
        memset(out, fill_value)
        return out

    def zeros(shape: tuple[int, ...], dtype: str, buffer: str = "sbuf", name: str = "") -> NkiTensor:
        return full(shape, 0.0, dtype, buffer, name)

    def ones(shape: tuple[int, ...], dtype: str, buffer: str = "sbuf", name: str = "") -> NkiTensor:
        return full(shape, 1.0, dtype, buffer, name)

    found = {f.__name__: f for f in (load, store, copy, matmul, transpose, full, zeros, ones)}
    assert set(found) == WRAPPERS
    return found


# --- the modules a kernel imports ---------------------------------------------------------------


def language(generation: Generation) -> types.ModuleType:
    module = types.ModuleType(f"{generation.namespace}.language", "simulated NKI language (kernelsweep)")
    names: dict[str, Any] = {d: d for d in DTYPES}
    names |= {b: b for b in ("sbuf", "psum", "hbm", "private_hbm", "shared_hbm")}
    names["tile_size"] = types.SimpleNamespace(
        pmax=PMAX,
        gemm_stationary_fmax=STATIONARY_FMAX,
        gemm_moving_fmax=MOVING_FMAX,
        psum_fmax=PSUM_BANK_BYTES // 4,
        psum_bank_fmax=PSUM_BANK_BYTES // 4,
    )
    names |= {
        "ndarray": ndarray,
        "ds": DynSlice,
        "affine_range": range,
        "sequential_range": range,
        "static_range": range,
        "program_id": lambda axis=0: current().program_id,
        "num_programs": lambda axes=None: current().num_programs,
        "program_ndim": lambda: 1 if current().num_programs > 1 else 0,
    }
    names |= {op: Op(op, generation) for op in (*ELEMENTWISE, *UNARY)}
    if generation.has_wrappers:
        wrappers = _wrappers(generation)
        names |= {k: f for k, f in wrappers.items() if k != "copy"}
        copy_op = Op("copy", generation)  # both the activation op and, from 0.3, the wrapper
        names["copy"] = _CallableOp(copy_op, wrappers)
    else:
        names["copy"] = Op("copy", generation)
    if generation.legacy:
        names["par_dim"] = ParDim
    module.__dict__.update(names)

    def missing(name: str) -> Any:
        if name in generation.removed_language or name.startswith("__"):
            raise AttributeError(f"module '{generation.namespace}.language' has no attribute '{name}'")
        return Op(name, generation)  # an operator the model does not compute: fine as op=, refused as a call

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


class _CallableOp(Op):
    """`nl.copy`: the copy operator, and from NKI 0.3 the PSUM/SBUF -> SBUF copy wrapper."""

    def __init__(self, op: Op, wrappers: dict[str, Callable[..., Any]]):
        super().__init__(op.name, op.generation)
        self._copy = wrappers["copy"]

    def __call__(self, *args: Any, dtype: str | None = None) -> NkiTensor:
        return self._copy(*args, dtype=dtype)


def isa(generation: Generation) -> types.ModuleType:
    module = types.ModuleType(f"{generation.namespace}.isa", "simulated NKI ISA (kernelsweep)")
    if generation.nisa_dst_operands:
        module.__dict__.update(ISA)
    module.__dict__["engine"] = types.SimpleNamespace(unknown="unknown", tensor="tensor", vector="vector")
    module.__getattr__ = lambda name: unmodelled(name)  # type: ignore[method-assign]
    return module
