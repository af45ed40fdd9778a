"""A stand-in for an nki-library matmul, to be swept as a baseline (`baseline = "nkilib:..."`).

The same contract as kernelsweep.kernels.nki.matmul (out[M, N] = lhsT[K, M].T @ rhs[K, N]) written as
a general-purpose library kernel would be: output tiles of 128 x 512 accumulated over K in PSUM, but
without splitting the work between the programs of an LNC=2 launch, so each physical core computes
the whole output, as a kernel that is not LNC-aware does (reference Corrections 3). It is not AWS's
code: nki-library is not available here; a real library kernel is named the same way.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    tile_k, tile_m, tile_n = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    for m0 in range(0, m_dim, tile_m):
        for n0 in range(0, n_dim, tile_n):
            m_size, n_size = min(tile_m, m_dim - m0), min(tile_n, n_dim - n0)
            acc = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.psum)
            for k0 in range(0, k_dim, tile_k):
                k_size = min(tile_k, k_dim - k0)
                stationary = nl.ndarray((k_size, m_size), dtype=lhsT.dtype, buffer=nl.sbuf)
                moving = nl.ndarray((k_size, n_size), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=stationary, src=lhsT[k0 : k0 + k_size, m0 : m0 + m_size])
                nisa.dma_copy(dst=moving, src=rhs[k0 : k0 + k_size, n0 : n0 + n_size])
                nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)
            result = nl.ndarray((m_size, n_size), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result, src=acc)
            nisa.dma_copy(dst=out[m0 : m0 + m_size, n0 : n0 + n_size], src=result)
    return out
