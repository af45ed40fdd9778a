"""Kernel definitions, loaded by `module:attribute` so users can sweep their own."""

from __future__ import annotations

import importlib

from kernelsweep.kernels.base import Cost, InvalidShapeError, KernelDefinition, TensorInfo

BUILTIN = {
    "mlp": "kernelsweep.kernels.mlp:mlp",
    "matmul": "kernelsweep.kernels.matmul:matmul",
    "vector_add": "kernelsweep.kernels.vector_add:vector_add",
}

__all__ = ["BUILTIN", "Cost", "InvalidShapeError", "KernelDefinition", "TensorInfo", "load_kernel"]


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
