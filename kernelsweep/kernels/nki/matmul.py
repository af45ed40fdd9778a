"""out[M, N] = lhsT[K, M].T @ rhs[K, N] in output tiles of up to 128 x 512, accumulating over K in PSUM.

Edge tiles are simply smaller. At LNC=2 the output tiles are dealt out to the two cores in turn;
a single output tile is first split by columns so that both cores have work.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    programs = nl.num_programs(0)
    tile_k = nl.tile_size.pmax  # contraction: the partition dimension of both operands
    tile_m = min(m_dim, nl.tile_size.gemm_stationary_fmax)  # stationary free size: 128
    tile_n = min(n_dim, nl.tile_size.gemm_moving_fmax)  # moving free size: 512, one PSUM bank of fp32
    m_tiles, n_tiles = -(-m_dim // tile_m), -(-n_dim // tile_n)
    if m_tiles * n_tiles < programs:
        tile_n = -(-n_dim // programs)
        n_tiles = -(-n_dim // tile_n)
    for tile in range(nl.program_id(0), m_tiles * n_tiles, programs):
        m0, n0 = (tile // n_tiles) * tile_m, (tile % n_tiles) * tile_n
        m_size, n_size = min(tile_m, m_dim - m0), min(tile_n, n_dim - n0)
        acc = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.psum)
        for k0 in range(0, k_dim, tile_k):
            k_size = min(tile_k, k_dim - k0)
            stationary = nl.ndarray((k_size, m_size), dtype=lhsT.dtype, buffer=nl.sbuf)
            moving = nl.ndarray((k_size, n_size), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=stationary, src=lhsT[k0 : k0 + k_size, m0 : m0 + m_size])
            nisa.dma_copy(dst=moving, src=rhs[k0 : k0 + k_size, n0 : n0 + n_size])
            nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)  # the first call overwrites, then accumulates
        result = nl.ndarray((m_size, n_size), dtype=out.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=result, src=acc)
        nisa.dma_copy(dst=out[m0 : m0 + m_size, n0 : n0 + n_size], src=result)
    return out
