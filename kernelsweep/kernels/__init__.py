"""Kernel definitions, loaded by `module:attribute` so users can sweep their own."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from kernelsweep.kernels.base import Cost, InvalidShapeError, KernelDefinition, TensorInfo

BUILTIN = {
    "mlp": "kernelsweep.kernels.mlp:mlp",
    "matmul": "kernelsweep.kernels.matmul:matmul",
    "vector_add": "kernelsweep.kernels.vector_add:vector_add",
}

__all__ = [
    "BUILTIN",
    "Cost",
    "InvalidShapeError",
    "KernelDefinition",
    "KernelSourceNotFound",
    "TensorInfo",
    "load_kernel",
    "nki_kernel_source",
]


class KernelSourceNotFound(ImportError):
    """The NKI kernel's module has no Python source on the import path."""


def load_kernel(ref: str) -> KernelDefinition:
    """Import `module:attribute`; raises ImportError / AttributeError / TypeError with a reason."""
    module_name, sep, attribute = ref.partition(":")
    if not sep or not module_name or not attribute:
        raise ImportError(f"kernel {ref!r} is not of the form 'module:attribute'")
    module = importlib.import_module(module_name)
    try:
        definition = getattr(module, attribute)
    except AttributeError:
        raise AttributeError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not isinstance(definition, KernelDefinition):
        raise TypeError(f"{ref} is a {type(definition).__name__}, not a KernelDefinition instance")
    return definition


def nki_kernel_source(ref: str) -> tuple[Path, str]:
    """(the file holding NKI kernel `module:function`, the function's name), found WITHOUT importing
    the module: it imports `nki`, which only a tracer may do (and only in its worker process)."""
    module_name, _, function = ref.partition(":")
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as exc:
        raise KernelSourceNotFound(f"cannot find the NKI kernel module {module_name!r}: {exc}") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise KernelSourceNotFound(f"cannot find the NKI kernel module {module_name!r} (no Python source on the path)")
    return Path(spec.origin), function
