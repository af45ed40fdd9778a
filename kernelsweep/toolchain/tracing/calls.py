"""What every real NKI tracing adapter (kernelsweep.toolchain.tracing.tracers) does the same way: probe an
API's signature, build the kernel's inputs exactly as the inputs stage does, read whichever result
shape the API returned, name the outputs, and find what the API wrote. Runs inside the trace worker
only (Python 3.10+, numpy and the SDK: kernelsweep.toolchain.tracing.interpreter).

A TypeError or AttributeError raised here means the adapter does not fit this host's API: the worker
then falls through to the next tracer (kernelsweep.toolchain.tracing.worker).
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kernelsweep import names
from kernelsweep.errors import TraceError
from kernelsweep.toolchain.tracing.binding import BOUND_FOLDER, bound_kernel
from kernelsweep.toolchain.tracing.request import TraceRequest

LEGACY_TRACE_KERNEL_MODULES = (
    "nki.compiler.backends.neuron.TraceKernel",  # as seed 000 imports it
    "neuronxcc.nki.compiler.backends.neuron.TraceKernel",  # where seed 004's traceback shows it
)
CONTEXT_MODULES = ("nki._backends.context", "nki.compiler.driver")  # where nki_ir_context has lived
# Where CompileOptions and compile_bir_to_neff live: the driver module first (awslabs/nki-autotune,
# 2026-04..06), then ncc_driver (the nki-library fork's harness).
COMPILE_MODULES = ("nki.compiler.driver", "nki.compiler.ncc_driver")
FRONTEND_ENV = "NKI_COMPILER_FRONTEND"  # NKI 0.7: `custom` keeps the old specialization (addendum F2)


class CompilerFailed(Exception):
    """The compile returned a failure instead of raising (`neuronx_cc_error` on the compiled kernel,
    as nki-autotune saw from 2026-04 to 2026-06): a compile error, whatever its words."""


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
    from kernelsweep.toolchain.packages import nki_version

    return nki_version()


def nki_at_least(major: int, minor: int) -> bool:
    """Whether the installed `nki` wheel is this version or newer (the legacy neuronxcc.nki never is)."""
    version = nki_package_version() or ""
    parts = version.split("+")[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def frontend_class(module: Any) -> tuple[Any, str]:
    """(the frontend class, the tracer-id variant it adds). NKI 0.7 specializes by Python tracing and
    keeps the old specialization only behind NKI_COMPILER_FRONTEND=custom (addendum F2): there the
    tracing frontend is preferred; before 0.7 ParserFrontend, as AWS's nki-library harness uses."""
    tracer_frontend = getattr(module, "TracerFrontend", None)
    if tracer_frontend is not None and nki_at_least(0, 7) and os.environ.get(FRONTEND_ENV) != "custom":
        return tracer_frontend, "tracer-frontend"
    return module.ParserFrontend, ""


def compile_api(*attributes: str) -> list[Any]:
    """The attributes from the first of COMPILE_MODULES that has them all."""
    errors = []
    for name in COMPILE_MODULES:
        try:
            module = importlib.import_module(name)
            return [getattr(module, attribute) for attribute in attributes]
        except (ImportError, AttributeError) as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("; ".join(errors))


def split_result(result: Any) -> tuple[Any, Any]:
    """(bir, compile result) from what compile_to_bir returned: the pair current NKI returns
    (`bir, cr = compile_to_bir(...)`, awslabs/nki-autotune 2026-04..06), or one object that carries
    its `.descriptor` (the nki-library fork). Anything else is an AttributeError: another shape."""
    if isinstance(result, tuple) and len(result) == 2:
        return result[0], result[1]
    return result, result.descriptor


def described_names(described: Any, inputs: dict[str, Any], request: TraceRequest) -> tuple[list[str], list[str]]:
    """The names the compile result reports: its input/output specs (nki-library; nki-autotune from
    2026-06), its argument/output names (nki-autotune 2026-04), else ours."""
    if getattr(described, "input_specs", None) is not None:
        return [s.name for s in described.input_specs], [s.name for s in described.output_specs]
    if getattr(described, "argument_names", None) is not None:
        return list(described.argument_names), list(described.output_names)
    return list(inputs), output_names(request)


def zero_inputs(described: Any) -> list[Any]:
    """Zero arrays shaped as the compile result's input specs: what nki-autotune hands
    compile_bir_to_neff with the (bir, cr) pair."""
    import numpy as np

    return [np.zeros(tuple(s.shape), dtype=np.dtype(s.dtype)) for s in described.input_specs]


def check_compiled(compiled: Any) -> Any:
    """A compiled kernel that carries `neuronx_cc_error` failed, whatever else it says."""
    error = getattr(compiled, "neuronx_cc_error", None)
    if error:
        raise CompilerFailed(f"neuronx_cc_error: {error}")
    return compiled


def kernel_and_inputs(request: TraceRequest, workdir: Path) -> tuple[Any, dict[str, Any]]:
    """The NKI kernel object, the point's tunables bound into it as constants (never handed to the
    compiler as inputs: kernelsweep.toolchain.tracing.binding), and its tensor inputs, built exactly
    as the inputs stage builds them, by the kernel's parameter names."""
    from kernelsweep.kernels import load_kernel

    if request.tunables:
        kernel = bound_kernel(request.nki_kernel, request.tunables, workdir / BOUND_FOLDER)
    else:
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
