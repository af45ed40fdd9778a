"""A vector add in the legacy `neuronxcc.nki` namespace (SDK <= 2.26), for the legacy-penguin route."""

import neuronxcc.nki.language as nl
from neuronxcc import nki


@nki.jit
def vector_add_kernel(a, b):
    tiles = a.shape[0]
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(tiles):
        nl.store(out[t], value=nl.add(nl.load(a[t]), nl.load(b[t])))
    return out
