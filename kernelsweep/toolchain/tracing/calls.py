"""What every real NKI tracing adapter (kernelsweep.toolchain.tracing.tracers) does the same way: probe an
API's signature, build the kernel's inputs exactly as the inputs stage does, name the outputs, and
find what the API wrote. Runs inside the trace worker only.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kernelsweep import names
from kernelsweep.errors import TraceError
from kernelsweep.toolchain.tracing import TraceRequest

LEGACY_TRACE_KERNEL_MODULES = (
    "nki.compiler.backends.neuron.TraceKernel",  # as seed 000 imports it
    "neuronxcc.nki.compiler.backends.neuron.TraceKernel",  # where seed 004's traceback shows it
)
CONTEXT_MODULES = ("nki._backends.context", "nki.compiler.driver")  # where nki_ir_context has lived


@dataclass(frozen=True)
class TensorStub:
    """The output description nki_standalone takes (a duck type: shape, dtype, name)."""

    shape: tuple[int, ...]
    dtype: Any
    name: str


def parameters(function: Callable[..., Any], what: str, required: Iterable[str]) -> list[str]:
    found = [p for p in inspect.signature(function).parameters if p != "self"]
    missing = [p for p in required if p not in found]
    if missing:
        raise TypeError(f"{what}{inspect.signature(function)} takes no {', '.join(missing)}: an unknown API variant")
    return found


def positional(function: Callable[..., Any], what: str, count: int) -> int:
    params = inspect.signature(function).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return count
    usable = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(usable) < count:
        raise TypeError(f"{what}{inspect.signature(function)} takes fewer than {count} positional arguments")
    return len(usable)


def nki_package_version() -> str | None:
    from kernelsweep.toolchain.versions import nki_version

    return nki_version()


def kernel_and_inputs(request: TraceRequest) -> tuple[Any, dict[str, Any]]:
    """The NKI kernel object and its inputs, built exactly as the inputs stage builds them."""
    from kernelsweep.kernels import load_kernel

    kernel = load_nki_kernel(request.nki_kernel)
    arrays = load_kernel(request.kernel_ref).build_inputs(request.params, request.dtype, request.seed)
    return kernel, bind(kernel, arrays)


def load_nki_kernel(ref: str) -> Any:
    module_name, _, attribute = ref.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise TraceError(
            f"cannot import the NKI kernel {ref!r} ({type(exc).__name__}: {exc}); check the definition's nki_kernel",
            error_class="KernelImport",
        ) from None


def bind(kernel: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs in the kernel's parameter order, checked against its signature by name."""
    func = getattr(kernel, "func", kernel)  # @nki.jit objects keep the Python function in .func
    try:
        return dict(inspect.signature(func).bind(**inputs).arguments)
    except TypeError as exc:
        raise TraceError(
            f"NKI kernel {getattr(func, '__name__', func)}{inspect.signature(func)} does not take the "
            f"definition's inputs {sorted(inputs)}: {exc}",
            error_class="KernelSignature",
        ) from None


def output_names(request: TraceRequest) -> list[str]:
    return list(request.output_names or [o.name for o in request.outputs])


def compile_options(api: SimpleNamespace, request: TraceRequest, workdir: Path, artifacts: Path) -> Any:
    # neuronx-cc refuses a non-empty artifacts folder (NCC_IDRV077): a fresh, empty one
    return api.CompileOptions(
        target=request.target,
        lnc=request.lnc,
        output_path=str(workdir / names.NEFF),
        artifacts_dir=str(fresh(artifacts)),
    )


def io_names(result: Any, inputs: dict[str, Any], request: TraceRequest) -> tuple[list[str], list[str]]:
    """The names the compiled kernel's descriptor reports (nki-library reads them there), else ours."""
    descriptor = getattr(result, "descriptor", None)
    if descriptor is not None and hasattr(descriptor, "input_specs"):
        return [s.name for s in descriptor.input_specs], [s.name for s in descriptor.output_specs]
    return list(inputs), output_names(request)


def neff_at(compiled: Any, workdir: Path, producer: str) -> Path:
    """The NEFF where the API says it put it (`neff_path`), not where we asked for it."""
    return require(Path(getattr(compiled, "neff_path", None) or workdir / names.NEFF), producer)


def signatures(**functions: Callable[..., Any]) -> str:
    return "; ".join(f"{name}{inspect.signature(f)}" for name, f in functions.items())


def fresh(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=False)
    return folder


def first_attribute(modules: tuple[str, ...], attribute: str) -> Any:
    errors = []
    for name in modules:
        try:
            return getattr(importlib.import_module(name), attribute)
        except (ImportError, AttributeError) as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("; ".join(errors))


def require(path: Path, producer: str) -> Path:
    if not path.is_file():
        written = sorted(p.name for p in path.parent.iterdir()) if path.parent.is_dir() else []
        raise TraceError(
            f"{producer} wrote no {path.name} in {path.parent} (found: {', '.join(written) or 'nothing'})",
            error_class="MissingOutput",
        )
    return path
