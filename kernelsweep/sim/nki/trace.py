"""Run an NKI kernel's real source on the simulated language, once per program of the launch.

This is the simulated tracer's core. The kernel's module is read from its file and executed with
`import nki` (or, for the legacy generation, `import neuronxcc.nki`) bound to the simulated modules,
never the installed SDK, so it works the same on a laptop and on a Neuron host. At LNC=2 the kernel
runs twice, as programs 0 and 1 of the launch sharing their `nl.shared_hbm` allocations; what each
program did (`ProgramWork`) says how evenly the kernel spread its work over the physical cores.
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import os
import types
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelsweep.kernels import KernelSourceNotFound, nki_kernel_source
from kernelsweep.sim.nki import lang as nki_lang
from kernelsweep.sim.nki import modules as nki_modules
from kernelsweep.sim.nki.generations import NEURONXCC_IN_KERNEL, Generation, check_source
from kernelsweep.sim.nki.tensor import NkiError, NkiTensor, Storage

TensorSpec = tuple[str, tuple[int, ...], str]  # (name, shape, dtype)
FRONTEND_ENV = "NKI_COMPILER_FRONTEND"


class KernelSignatureError(TypeError):
    """The kernel's parameters are not the definition's inputs."""


@dataclass(frozen=True)
class KernelTrace:
    generation: str
    source: Path
    source_sha256: str
    programs: tuple[dict[str, int], ...]  # per program: instructions, dma, macs, vector_elems, ...
    unmodelled: tuple[str, ...]
    warnings: tuple[str, ...]
    outputs: dict[str, Any] = field(default_factory=dict, compare=False)  # values mode: name -> (values, written)
    # (line, engine, instructions, work units) over every program: the program by source line
    lines: tuple[tuple[int, str, int, int], ...] = ()

    @property
    def dma_count(self) -> int:
        return sum(p.get("dma", 0) for p in self.programs)

    def total(self, work: str) -> int:
        """One kind of work summed over the launch's programs (hbm_read_bytes, macs, pe_cycles, ...)."""
        return sum(p.get(work, 0) for p in self.programs)

    @property
    def parallelism(self) -> float:
        """How many physical cores' worth of work ran at once: the compute all programs did, counted
        once (output elements written by several programs are redundant work), over the busiest one."""
        compute = [p.get("macs", 0) + p.get("vector_elems", 0) or p.get("dma", 0) for p in self.programs]
        busiest = max(compute, default=0)
        if busiest == 0:
            return 1.0
        written = sum(p.get("shared_writes", 0) for p in self.programs)
        needed = sum(p.get("output_elements", 0) for p in self.programs[:1]) or written
        redundancy = max(1.0, written / needed) if needed else 1.0
        return min(float(len(self.programs)), max(1.0, sum(compute) / redundancy / busiest))


def trace_kernel(
    ref: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    generation: Generation,
    lnc: int,
    values: Mapping[str, Any] | None = None,
    source: tuple[Path, str] | None = None,
) -> KernelTrace:
    """Check the source, then run the kernel as programs 0..lnc-1 on its tensors alone; values given:
    compute outputs too. `source` is the (file, function) to run in place of `ref`'s own: the kernel
    with a point's tunables bound in (kernelsweep.toolchain.tracing.binding).

    A parsing front end checks the whole source, dead branches included; NKI 0.7's tracing one only
    what runs, unless NKI_COMPILER_FRONTEND=custom keeps the parser (generations.traces_python)."""
    path, function = source or nki_kernel_source(ref)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    parses = not generation.traces_python or os.environ.get(FRONTEND_ENV) == "custom"
    if values is None:
        return _cached(ref, str(path), sha, function, tuple(inputs), tuple(outputs), generation, lnc, parses)
    return _trace(ref, path, sha, function, inputs, outputs, generation, lnc, parses, values)


@lru_cache(maxsize=64)
def _cached(
    ref: str,
    path: str,
    sha: str,
    function: str,
    inputs: tuple[TensorSpec, ...],
    outputs: tuple[TensorSpec, ...],
    generation: Generation,
    lnc: int,
    parses: bool,
) -> KernelTrace:
    return _trace(ref, Path(path), sha, function, inputs, outputs, generation, lnc, parses, None)


def _trace(
    ref: str,
    path: Path,
    sha: str,
    function: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    generation: Generation,
    lnc: int,
    parses: bool,
    values: Mapping[str, Any] | None,
) -> KernelTrace:
    warnings = check_source(path, function, generation, whole=parses)
    kernel = _load(path, function, generation)
    shared: list[Storage] = []
    input_storages = {
        name: Storage(shape, dtype, "shared_hbm", name, values is not None, generation) for name, shape, dtype in inputs
    }
    if values is not None:
        from kernelsweep.sim.nki import values as nki_values

        for name, storage in input_storages.items():
            nki_values.fill(NkiTensor(storage, storage.shape), values[name])
    programs, unmodelled, returned = [], set(), []
    instructions: Counter[tuple[int, str]] = Counter()
    units: Counter[tuple[int, str]] = Counter()
    for program in range(lnc):
        trace = nki_lang.Trace(generation, program, lnc, values is not None, shared, source=str(path))
        tensors = {n: NkiTensor(s, s.shape) for n, s in input_storages.items()}
        arguments = _bind(kernel, tensors, ref)
        nki_lang._current.append(trace)
        try:
            result = kernel(**arguments)
        finally:
            nki_lang._current.pop()
        returned = _outputs(result, outputs, generation, ref)
        trace.work["output_elements"] = sum(t.size for t in returned)
        programs.append(dict(trace.work))
        instructions.update(trace.line_instructions)
        units.update(trace.line_units)
        unmodelled |= trace.unmodelled
        warnings += sorted(trace.warnings - set(warnings))
    found = {}
    if values is not None:
        from kernelsweep.sim.nki import values as nki_values

        found = {spec[0]: nki_values.result(t) for spec, t in zip(outputs, returned, strict=True)}
    lines = tuple(sorted((line, engine, n, units[(line, engine)]) for (line, engine), n in instructions.items()))
    return KernelTrace(
        generation.name, path, sha, tuple(programs), tuple(sorted(unmodelled)), tuple(warnings), found, lines
    )


def _load(path: Path, function: str, generation: Generation) -> Any:
    """Execute the kernel's module with the simulated NKI modules in place of the real ones."""
    modules = _modules(generation)
    namespace: dict[str, Any] = {"__name__": f"kernelsweep_sim_kernel_{path.stem}", "__file__": str(path)}
    namespace["__builtins__"] = {**vars(builtins), "__import__": _importer(modules, generation)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the kernel, as a tracer runs it
    if function not in namespace:
        raise KernelSourceNotFound(f"{path.name} defines no {function!r}")
    kernel = namespace[function]
    return getattr(kernel, "func", kernel)


def _modules(generation: Generation) -> dict[str, types.ModuleType]:
    language, isa = nki_modules.language(generation), nki_modules.isa(generation)
    nki = types.ModuleType(generation.namespace, "simulated NKI (kernelsweep)")
    nki.__dict__.update(language=language, isa=isa, jit=_jit)
    found = {
        generation.namespace: nki,
        f"{generation.namespace}.language": language,
        f"{generation.namespace}.isa": isa,
    }
    if generation.legacy:
        found["neuronxcc"] = types.ModuleType("neuronxcc")
        found["neuronxcc"].__dict__["nki"] = nki
    elif not generation.neuronxcc_in_kernel_is_error:  # 2.27-2.29 ship both namespaces side by side
        found["neuronxcc"] = types.ModuleType("neuronxcc")
        found["neuronxcc"].__dict__["nki"] = nki
        found |= {
            name.replace("nki", "neuronxcc.nki", 1): m for name, m in list(found.items()) if name.startswith("nki")
        }
    return found


def _importer(modules: dict[str, types.ModuleType], generation: Generation) -> Any:
    real = builtins.__import__
    simulated_roots = {"nki", "neuronxcc"}

    def hook(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and name.split(".")[0] in simulated_roots:
            if name.startswith("neuronxcc") and generation.neuronxcc_in_kernel_is_error:
                raise NkiError(NEURONXCC_IN_KERNEL)
            if name not in modules:
                raise ModuleNotFoundError(f"No module named '{name}'", name=name)
            return modules[name] if fromlist else modules[name.split(".")[0]]
        return real(name, globals, locals, fromlist, level)

    return hook


class _Jit:
    """`@nki.jit`: the Python function in `.func`, callable, and `kernel[grid]` launchable."""

    def __init__(self, func: Any = None, **options: Any):
        self.func = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Any:
        return self.func


def _jit(func: Any = None, **options: Any) -> Any:
    if func is None:
        return lambda f: _Jit(f, **options)
    return _Jit(func)


def _bind(kernel: Any, tensors: dict[str, Any], ref: str) -> dict[str, Any]:
    try:
        return dict(inspect.signature(kernel).bind(**tensors).arguments)
    except TypeError as exc:
        raise KernelSignatureError(
            f"NKI kernel {ref}{inspect.signature(kernel)} does not take the definition's inputs "
            f"{sorted(tensors)}: {exc}"
        ) from None


def _outputs(result: Any, expected: Sequence[TensorSpec], generation: Generation, ref: str) -> list[NkiTensor]:
    returned = list(result) if isinstance(result, tuple | list) else [result]
    if not all(isinstance(t, NkiTensor) for t in returned):
        raise NkiError(f"{ref} must return its output tensor(s), not {result!r}")
    got = [(t.shape, t.dtype) for t in returned]
    wanted = [(shape, dtype) for _, shape, dtype in expected]
    if got != wanted:
        raise NkiError(f"{ref} returned {got}; the definition declares outputs {wanted}")
    for tensor in returned:
        if generation.outputs_in_shared_hbm and tensor.buffer != "shared_hbm":
            raise NkiError(f"{ref}: output tensors must use nl.shared_hbm (NKI 0.3+), not {tensor.buffer}")
    return returned
