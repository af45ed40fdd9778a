"""A vector add written for legacy NKI (`neuronxcc.nki`, SDK <= 2.26): the simulated legacy route's kernel."""

from kernelsweep.kernels.vector_add import VectorAdd


class LegacyVectorAdd(VectorAdd):
    nki_kernel = "kernels.legacy_nki:vector_add_kernel"


legacy_vector_add = LegacyVectorAdd()
