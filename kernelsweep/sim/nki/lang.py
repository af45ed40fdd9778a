"""The simulated `nki.language` and `nki.isa`: what a kernel calls while the simulated tracer runs it.

Every modelled call checks what the real tracer or compiler checks (reference Corrections 3 and the
nki.isa docs): the partition dimension of an on-chip tile is at most 128; nc_matmul reads SBUF and
writes a float32 PSUM tile of one bank (512 fp32 per partition), its stationary free size is at
most 128 and its moving free size at most 512; DMA never touches PSUM; tensor_tensor reads at most
one PSUM operand; generation rules come from kernelsweep.sim.nki.generations. Each call adds to the
running program's work counts; with values on (kernelsweep.sim.nki.values) it also computes.

Each instruction takes exactly the parameters the model uses; kernelsweep.sim.nki.modules binds a
kernel's call against the generation's published signature first (sim.nki.stubs), so a keyword the
SDK does not take is a TypeError here too. Published instructions the model does not know are
accepted and counted but not checked (`Trace.unmodelled`), so a user kernel is never refused for
using an instruction the simulator lacks; computing values through one is refused instead.
"""

from __future__ import annotations

import inspect
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelsweep.dtypes import ITEMSIZE
from kernelsweep.kernels.base import SBUF_PARTITION_BYTES
from kernelsweep.sim.nki.cycles import MATMUL_FIXED_CYCLES
from kernelsweep.sim.nki.generations import Generation
from kernelsweep.sim.nki.tensor import HBM, NkiError, NkiTensor, Storage

PMAX = 128
STATIONARY_FMAX = 128
MOVING_FMAX = 512  # NeuronCore-v2/v3
PSUM_BANK_BYTES = 2048  # per partition: 512 fp32
NKI_PARTITION_ERROR = (  # the NKI tracer's own wording (seed 004)
    "number of partitions {parts} exceed architecture limitation of {limit}. Info on how to fix: "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/nki/api/nki.errors.html"
    "#err-num-partition-exceed-arch-limit"
)
DTYPES = ("float32", "bfloat16", "float16", "tfloat32", "int32", "int8", "uint8", "uint32", "bool_")
ELEMENTWISE = ("add", "subtract", "multiply", "divide", "maximum", "minimum")
UNARY = ("exp", "tanh", "silu", "relu", "sigmoid", "gelu", "square", "sqrt", "reciprocal", "abs", "negative")


@dataclass
class Trace:
    """One program's run of a kernel: which program, what it did, what it shares with the others."""

    generation: Generation
    program_id: int
    num_programs: int
    values: bool
    shared: list[Storage]  # shared_hbm allocations in call order: the same objects for every program
    work: Counter[str] = field(default_factory=Counter)
    unmodelled: set[str] = field(default_factory=set)
    warnings: set[str] = field(default_factory=set)
    shared_seen: int = 0
    source: str = ""  # the kernel's file: its lines are what each instruction is attributed to
    # (line, engine) -> instructions and work units (MACs, elements, bytes): the compiled program by line
    line_instructions: Counter[tuple[int, str]] = field(default_factory=Counter)
    line_units: Counter[tuple[int, str]] = field(default_factory=Counter)


_current: list[Trace] = []


def current() -> Trace:
    if not _current:
        raise NkiError("NKI language calls are only valid while a kernel is being traced")
    return _current[-1]


class Op:
    """An operator constant (`op=nl.add` for nisa) that the 0.3+ wrappers also make callable; a call
    binds against the generation's published signature when it has one (`nl.add(x, y, dtype=None)`)."""

    def __init__(self, name: str, generation: Generation, signature: inspect.Signature | None = None):
        self.name, self.generation, self.signature = name, generation, signature

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> NkiTensor:
        if not self.generation.has_wrappers:
            raise TypeError(
                f"nl.{self.name} is an operator in NKI {self.generation.name} (pass op=nl.{self.name} to an "
                f"nki.isa instruction); the nl.{self.name}(...) wrapper came with NKI 0.3"
            )
        if self.signature is not None:
            try:
                self.signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{self.name}() {exc}") from None
        dtype = kwargs.get("dtype")
        tiles = [a for a in (*args, *kwargs.values()) if isinstance(a, NkiTensor)]
        if not tiles or len(tiles) > 2:
            raise NkiError(f"nl.{self.name} takes one or two tiles")
        out = new_tensor(tiles[0].shape, dtype or tiles[0].dtype, "sbuf")
        _elementwise(f"nl.{self.name}", out, tiles, self.name)
        return out


# --- allocation -------------------------------------------------------------------------------


def new_tensor(shape: tuple[int, ...], dtype: str, buffer: str, name: str = "") -> NkiTensor:
    trace = current()
    shape = tuple(map(int, shape))
    if buffer in ("sbuf", "psum"):
        if shape[0] > PMAX:
            raise ValueError(NKI_PARTITION_ERROR.format(parts=shape[0], limit=PMAX))
        free_bytes = _free(shape) * ITEMSIZE.get(dtype, 4)
        if buffer == "sbuf" and free_bytes > SBUF_PARTITION_BYTES:
            raise NkiError(
                f"SBUF tile {shape} {dtype} needs {free_bytes} bytes per partition, more than an SBUF partition "
                f"holds ({SBUF_PARTITION_BYTES})"
            )
        if buffer == "psum" and free_bytes > PSUM_BANK_BYTES:
            raise NkiError(
                f"PSUM tile {shape} {dtype} needs {free_bytes} bytes per partition, more than one PSUM bank "
                f"({PSUM_BANK_BYTES}: 512 fp32)"
            )
    if buffer == "shared_hbm":  # one allocation seen by every program of the launch
        index = trace.shared_seen
        trace.shared_seen += 1
        if index == len(trace.shared):
            trace.shared.append(Storage(shape, dtype, buffer, name, trace.values, trace.generation))
        return NkiTensor(trace.shared[index], shape)
    return NkiTensor(Storage(shape, dtype, buffer, name, trace.values, trace.generation), shape)


def ndarray(shape: tuple[int, ...], dtype: str, buffer: str = "sbuf", name: str = "", address: Any = None) -> NkiTensor:
    if any(isinstance(s, ParDim) for s in shape):
        raise NkiError("block dimensions (nl.par_dim) are not modelled by the simulated tracer")
    return new_tensor(tuple(shape), dtype, buffer, name)


class ParDim(int):
    """Legacy `nl.par_dim(n)`; only meaningful to the legacy generation."""


def _free(shape: tuple[int, ...]) -> int:
    size = 1
    for s in shape[1:]:
        size *= s
    return size


# --- instruction checks -----------------------------------------------------------------------


def require_tile(what: str, tensor: Any, buffers: tuple[str, ...]) -> NkiTensor:
    if not isinstance(tensor, NkiTensor):
        raise NkiError(f"{what} must be an NKI tensor, got {type(tensor).__name__}")
    if tensor.buffer not in buffers:
        raise NkiError(f"{what} must be in {' or '.join(buffers)}, not {tensor.buffer}")
    return tensor


def _same_layout(what: str, a: NkiTensor, b: NkiTensor) -> None:
    if a.partitions != b.partitions or a.free_size != b.free_size:
        raise NkiError(f"{what}: {a.shape} and {b.shape} differ in partitions or elements per partition")


def _count(engine: str, units: int, **work: int) -> None:
    """One instruction on `engine` doing `units` of work, at the kernel source line that issued it."""
    trace = current()
    counts = trace.work
    counts["instructions"] += 1
    for name, amount in work.items():  # Counter.update's own loop, without its per-call type checks
        counts[name] += amount
    where = (_kernel_line(trace.source), engine)
    trace.line_instructions[where] += 1
    trace.line_units[where] += units


def _kernel_line(source: str) -> int:
    """The innermost line of the kernel's own file on the call stack (a helper in the kernel's file
    counts at its own line, as a compiler's debug info records the call site), 0 when none is."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == source:
            return frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return 0


def _elementwise(
    what: str, dst: NkiTensor, sources: list[NkiTensor], op: str, scale: float = 1.0, engine: str = "vector"
) -> None:
    for s in sources:
        _same_layout(what, dst, s)
    _count(engine, dst.size, vector_elems=dst.size)
    if current().values:
        from kernelsweep.sim.nki import values as v

        args = [v.read(s, what).reshape(dst.shape) for s in sources]
        v.write(dst, v.apply(op, *([args[0] * scale] + args[1:])))


def dma_copy(dst: NkiTensor, src: NkiTensor) -> None:
    any_but_psum = ("sbuf", *HBM)
    require_tile("dma_copy dst", dst, any_but_psum)
    require_tile("dma_copy src", src, any_but_psum)
    size = dst.size
    if size != src.size:
        raise NkiError(f"dma_copy: src {src.shape} and dst {dst.shape} hold different numbers of elements")
    hbm_read = size * ITEMSIZE.get(src.dtype, 4) if src.buffer in HBM else 0
    moved = size * ITEMSIZE.get(dst.dtype, 4)
    hbm_write = moved if dst.buffer in HBM else 0
    shared = size if dst.buffer == "shared_hbm" else 0
    _count("dma", moved, dma=1, hbm_read_bytes=hbm_read, hbm_write_bytes=hbm_write, shared_writes=shared)
    if current().values:
        from kernelsweep.sim.nki import values as v

        v.write(dst, v.read(src, "dma_copy"))


def nc_matmul(dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, accumulate: bool | None = None) -> None:
    trace = current()
    require_tile("nc_matmul stationary", stationary, ("sbuf",))
    require_tile("nc_matmul moving", moving, ("sbuf",))
    require_tile("nc_matmul dst", dst, ("psum",))
    k, m, n = stationary.partitions, stationary.free_size, moving.free_size
    if moving.partitions != k:
        raise NkiError(
            f"nc_matmul: stationary {stationary.shape} and moving {moving.shape} contract over different sizes"
        )
    if k > PMAX:
        raise ValueError(NKI_PARTITION_ERROR.format(parts=k, limit=PMAX))
    if m > STATIONARY_FMAX:
        raise NkiError(f"nc_matmul: stationary free size {m} exceeds gemm_stationary_fmax {STATIONARY_FMAX}")
    if n > MOVING_FMAX:
        raise NkiError(f"nc_matmul: moving free size {n} exceeds gemm_moving_fmax {MOVING_FMAX}")
    if (dst.partitions, dst.free_size) != (m, n):
        raise NkiError(f"nc_matmul: dst {dst.shape} is not stationary free x moving free ({m}, {n})")
    if dst.dtype != "float32":
        raise NkiError(f"nc_matmul: dst must be a float32 PSUM tile on NeuronCore-v2/v3, not {dst.dtype}")
    if (stationary.dtype == "float32") != (moving.dtype == "float32"):
        raise NkiError("nc_matmul: a float32 operand needs a float32 partner")
    cycles = n + MATMUL_FIXED_CYCLES  # the TensorE time of this matmul, which its line is charged
    _count("tensor", cycles, macs=k * m * n, pe_cycles=cycles)
    if trace.values:
        _matmul_values(dst, stationary, moving, accumulate)


def _matmul_values(dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, accumulate: bool | None) -> None:
    from kernelsweep.sim.nki import values as v

    product = v.as_matrix(v.read(stationary, "nc_matmul")).T @ v.as_matrix(v.read(moving, "nc_matmul"))
    started = v.accumulated(dst)
    if accumulate is None:
        if started.any() and not started.all():
            raise NkiError("nc_matmul: dst is partly an accumulation in progress; give each output tile its own PSUM")
        accumulate = bool(started.all())
    if accumulate:
        if not started.all():
            raise NkiError("nc_matmul(accumulate=True) on PSUM no matmul has written: undefined on hardware")
        product = product + v.read(dst, "nc_matmul").reshape(product.shape)
    v.write(dst, product)
    started[...] = True


def nc_transpose(dst: NkiTensor, data: NkiTensor) -> None:
    require_tile("nc_transpose data", data, ("sbuf", "psum"))
    require_tile("nc_transpose dst", dst, ("sbuf", "psum"))
    if data.partitions > PMAX or data.free_size > PMAX:
        raise NkiError(f"nc_transpose: {data.shape} is larger than the 128 x 128 the TensorE transposes")
    if (dst.partitions, dst.free_size) != (data.free_size, data.partitions) or dst.dtype != data.dtype:
        raise NkiError(f"nc_transpose: dst {dst.shape} {dst.dtype} is not data {data.shape} {data.dtype} transposed")
    _count("vector", data.size, vector_elems=data.size)
    if current().values:
        from kernelsweep.sim.nki import values as v

        v.write(dst, v.as_matrix(v.read(data, "nc_transpose")).T)


def tensor_copy(dst: NkiTensor, src: NkiTensor) -> None:
    require_tile("tensor_copy src", src, ("sbuf", "psum"))
    require_tile("tensor_copy dst", dst, ("sbuf", "psum"))
    _elementwise("tensor_copy", dst, [src], "copy")


def tensor_tensor(dst: NkiTensor, data1: NkiTensor, data2: NkiTensor, op: Any) -> None:
    for what, t in (("dst", dst), ("data1", data1), ("data2", data2)):
        require_tile(f"tensor_tensor {what}", t, ("sbuf", "psum"))
    if data1.buffer == data2.buffer == "psum":
        raise NkiError("tensor_tensor: data1 and data2 cannot both be in PSUM")
    _elementwise("tensor_tensor", dst, [data1, data2], _op_name(op))


def activation(dst: NkiTensor, op: Any, data: NkiTensor, bias: Any = None, scale: float = 1.0) -> None:
    require_tile("activation data", data, ("sbuf", "psum"))
    require_tile("activation dst", dst, ("sbuf", "psum"))
    if bias is not None:
        current().unmodelled.add("activation(bias=...)")
    _elementwise("activation", dst, [data], _op_name(op), scale, engine="scalar")


def memset(dst: NkiTensor, value: float) -> None:
    require_tile("memset dst", dst, ("sbuf", "psum", *HBM))
    _count("gpsimd", dst.size, vector_elems=dst.size)
    if current().values:
        from kernelsweep.sim.nki import values as v

        v.write(dst, [value] * dst.size)


def _op_name(op: Any) -> str:
    return op.name if isinstance(op, Op) else getattr(op, "__name__", str(op))


def unmodelled(name: str) -> Callable[..., None]:
    def instruction(*args: Any, **kwargs: Any) -> None:
        trace = current()
        if trace.values:
            raise NkiError(f"the simulated NKI interpreter has no numeric model of nisa.{name}")
        trace.unmodelled.add(f"nisa.{name}")
        tiles = [a for a in (*args, *kwargs.values()) if isinstance(a, NkiTensor)]
        size = max((a.size for a in tiles), default=0)
        _count("vector", size, vector_elems=size)

    instruction.__name__ = name
    return instruction


ISA: dict[str, Callable[..., None]] = {
    f.__name__: f for f in (dma_copy, nc_matmul, nc_transpose, tensor_copy, tensor_tensor, activation, memset)
}
