"""The modules a kernel imports from the simulated NKI: `nki.language` and `nki.isa` as one generation
has them, with the 0.3+ (and legacy) `nl.load` / `nl.store` / `nl.copy` ... wrappers built from the
modelled instructions (kernelsweep.sim.nki.lang).

Every call binds against the generation's published signature (kernelsweep.sim.nki.stubs) before
the model sees it: an unknown keyword or a missing argument is the TypeError the SDK raises, and
`nki.isa` has exactly the names the generation's stubs list (AttributeError for any other). The
language stubs of NKI 0.1 and 0.2 leave out the operators (nl.silu, nl.exp ...) their docs list
(nki.api.shared.rst), so `nki.language` still takes any operator name a generation did not remove.
The legacy `neuronxcc.nki` has no stubs: its calls are not bound.
"""

from __future__ import annotations

import inspect
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
from kernelsweep.sim.nki.stubs import ISA as ISA_STUBS
from kernelsweep.sim.nki.stubs import LANGUAGE, Api, api
from kernelsweep.sim.nki.tensor import HBM, DynSlice, NkiError, NkiTensor


def bound(name: str, model: Callable[..., Any], signature: inspect.Signature | None) -> Callable[..., Any]:
    """`model` behind the published signature: the call binds as the SDK's would (the TypeError a
    Python function raises, in its words), then the model gets the arguments it uses (the others, such
    as dge_mode or name, change nothing it models). Every stub parameter is positional-or-keyword, so
    the binding is done by hand: inspect's is too slow for kernels that unroll to 10^5 instructions."""
    if signature is None:
        return model
    names = tuple(signature.parameters)
    allowed = frozenset(names)
    required = frozenset(n for n, p in signature.parameters.items() if p.default is p.empty)
    params = inspect.signature(model).parameters
    takes = names if any(p.kind is p.VAR_KEYWORD for p in params.values()) else tuple(n for n in names if n in params)
    taken = frozenset(takes)

    def call(*args: Any, **kwargs: Any) -> Any:
        if args:
            if len(args) > len(names):
                raise TypeError(f"{name}() takes {len(names)} positional arguments but {len(args)} were given")
            for key, value in zip(names, args, strict=False):  # longer args were refused above
                if key in kwargs:
                    raise TypeError(f"{name}() got multiple values for argument '{key}'")
                kwargs[key] = value
        if not allowed.issuperset(kwargs):
            unknown = next(key for key in kwargs if key not in allowed)
            raise TypeError(f"{name}() got an unexpected keyword argument '{unknown}'")
        if not required.issubset(kwargs):
            missing = next(n for n in names if n in required and n not in kwargs)
            raise TypeError(f"{name}() missing required argument: '{missing}'")
        if taken.issuperset(kwargs):  # the model uses every argument given: pass them as they are
            return model(**kwargs)
        return model(**{k: kwargs[k] for k in takes if k in kwargs})

    call.__name__ = name
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


def _published(generation: Generation, module: str) -> Api | None:
    return None if generation.legacy else api(generation.name, module)


def _signature(found: Api | None, name: str) -> inspect.Signature | None:
    return found.functions.get(name) if found else None


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


def _range(start: int, stop: int | None = None, step: int = 1) -> range:
    return range(start) if stop is None else range(start, stop, step)


def _deprecated_range(name: str) -> Callable[..., range]:
    """NKI 0.7: affine_range, sequential_range and static_range are deprecated and are Python's range
    (addendum F4); the trace records the warning."""

    def loop(start: int, stop: int | None = None, step: int = 1) -> range:
        current().warnings.add(f"nl.{name} is deprecated in NKI 0.7: it is Python's range")
        return _range(start, stop, step)

    return loop


def language(generation: Generation) -> types.ModuleType:
    module = types.ModuleType(f"{generation.namespace}.language", "simulated NKI language (kernelsweep)")
    published = _published(generation, LANGUAGE)
    names: dict[str, Any] = {d: d for d in DTYPES}
    names |= {b: b for b in ("sbuf", "psum", "hbm", "private_hbm", "shared_hbm")}
    names["tile_size"] = types.SimpleNamespace(
        pmax=PMAX,
        gemm_stationary_fmax=STATIONARY_FMAX,
        gemm_moving_fmax=MOVING_FMAX,
        psum_fmax=PSUM_BANK_BYTES // 4,
        psum_bank_fmax=PSUM_BANK_BYTES // 4,
    )
    ranges = ("affine_range", "sequential_range", "static_range")
    functions: dict[str, Callable[..., Any]] = {
        "ndarray": ndarray,
        "ds": DynSlice,
        **{r: _deprecated_range(r) if generation.ranges_deprecated else _range for r in ranges},
        "program_id": lambda axis=0: current().program_id,
        "num_programs": lambda axes=None: current().num_programs,
        "program_ndim": lambda: 1 if current().num_programs > 1 else 0,
    }
    if not generation.dynamic_range_removed:
        functions["dynamic_range"] = _range
    names |= {op: Op(op, generation, _signature(published, op)) for op in (*ELEMENTWISE, *UNARY)}
    if generation.has_wrappers:
        wrappers = _wrappers(generation)
        functions |= {k: f for k, f in wrappers.items() if k != "copy"}
        copy_op = Op("copy", generation)  # both the activation op and, from 0.3, the wrapper
        names["copy"] = _CallableOp(copy_op, wrappers, _signature(published, "copy"))
    else:
        names["copy"] = Op("copy", generation)
    names |= {name: bound(name, f, _signature(published, name)) for name, f in functions.items()}
    if generation.legacy:
        names["par_dim"] = ParDim
    module.__dict__.update(names)

    def missing(name: str) -> Any:
        if name in generation.removed_language or name.startswith("__"):
            raise AttributeError(f"module '{generation.namespace}.language' has no attribute '{name}'")
        return Op(name, generation, _signature(published, name))  # an operator the model does not compute

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


class _CallableOp(Op):
    """`nl.copy`: the copy operator, and from NKI 0.3 the PSUM/SBUF -> SBUF copy wrapper."""

    def __init__(self, op: Op, wrappers: dict[str, Callable[..., Any]], signature: inspect.Signature | None):
        super().__init__(op.name, op.generation)
        self._copy = bound("copy", wrappers["copy"], signature)

    def __call__(self, *args: Any, **kwargs: Any) -> NkiTensor:
        return self._copy(*args, **kwargs)


class _Constants:
    """An enum of the ISA (`nisa.engine`, `nisa.dge_mode` ...): any member is a name the model ignores."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, member: str) -> str:
        if member.startswith("__"):
            raise AttributeError(member)
        return f"{self._name}.{member}"


def isa(generation: Generation) -> types.ModuleType:
    module = types.ModuleType(f"{generation.namespace}.isa", "simulated NKI ISA (kernelsweep)")
    published = _published(generation, ISA_STUBS)
    if published is None:  # legacy: instructions return new tiles; none is modelled
        module.__dict__["engine"] = types.SimpleNamespace(unknown="unknown", tensor="tensor", vector="vector")
        module.__getattr__ = lambda name: unmodelled(name)  # type: ignore[method-assign]
        return module
    for name, signature in published.functions.items():
        module.__dict__[name] = bound(name, ISA.get(name) or unmodelled(name), signature)
    module.__dict__.update({name: _Constants(name) for name in published.names})

    def missing(name: str) -> Any:
        raise AttributeError(f"module '{generation.namespace}.isa' has no attribute '{name}'")

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module
