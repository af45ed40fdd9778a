"""out[M, N] = lhsT[K, M].T @ rhs[K, N] in output tiles of tile_m x tile_n, accumulating over K in PSUM.

The tunables (kernelsweep.kernels.matmul says which values are valid):
  tile_m, tile_n, tile_k  the output tile and the contraction step; the hardware caps them at 128
                          (stationary free size), 512 (moving free size, one PSUM bank of fp32) and 128
                          (partitions); edge tiles are simply smaller
  loop_order              "mn": M outer; each M block's stationary tiles (all of K) are loaded once and
                          kept in SBUF while the N tiles stream past, so lhsT is read once and rhs once
                          per M block; "nm": N outer, the moving tiles are kept and lhsT is re-read
                          instead. The cheaper one depends on the shape (M against N)

At LNC=2 the outer blocks are dealt out to the two cores in turn; fewer outer blocks than cores are
first split so that both cores have work.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs, tile_m=128, tile_n=512, tile_k=128, loop_order="mn"):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    programs = nl.num_programs(0)
    tile_k = min(tile_k, k_dim, nl.tile_size.pmax)
    tile_m = min(tile_m, m_dim, nl.tile_size.gemm_stationary_fmax)
    tile_n = min(tile_n, n_dim, nl.tile_size.gemm_moving_fmax)
    m_outer = loop_order == "mn"
    outer_dim, inner_dim = (m_dim, n_dim) if m_outer else (n_dim, m_dim)
    tile_outer, tile_inner = (tile_m, tile_n) if m_outer else (tile_n, tile_m)
    outer_tiles = -(-outer_dim // tile_outer)
    if outer_tiles < programs:
        tile_outer = -(-outer_dim // programs)
        outer_tiles = -(-outer_dim // tile_outer)
    k_tiles = -(-k_dim // tile_k)
    for block in range(nl.program_id(0), outer_tiles, programs):
        o0 = block * tile_outer
        o_size = min(tile_outer, outer_dim - o0)
        held = _load_block(lhsT if m_outer else rhs, o0, o_size, k_dim, tile_k, k_tiles)
        for i0 in range(0, inner_dim, tile_inner):
            i_size = min(tile_inner, inner_dim - i0)
            m0, m_size, n0, n_size = (o0, o_size, i0, i_size) if m_outer else (i0, i_size, o0, o_size)
            acc = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.psum)
            for kt in range(k_tiles):
                k0 = kt * tile_k
                k_size = min(tile_k, k_dim - k0)
                streamed = nl.ndarray((k_size, i_size), dtype=lhsT.dtype, buffer=nl.sbuf)
                if m_outer:
                    nisa.dma_copy(dst=streamed, src=rhs[k0 : k0 + k_size, n0 : n0 + n_size])
                else:
                    nisa.dma_copy(dst=streamed, src=lhsT[k0 : k0 + k_size, m0 : m0 + m_size])
                kept = held[0:k_size, kt * o_size : (kt + 1) * o_size]
                stationary, moving = (kept, streamed) if m_outer else (streamed, kept)
                nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)  # the first call overwrites
            result = nl.ndarray((m_size, n_size), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result, src=acc)
            nisa.dma_copy(dst=out[m0 : m0 + m_size, n0 : n0 + n_size], src=result)
    return out


def _load_block(operand, o0, o_size, k_dim, tile_k, k_tiles):
    """The outer operand's columns o0 .. o0 + o_size for all of K, as k_tiles tiles side by side in SBUF."""
    held = nl.ndarray((min(tile_k, k_dim), k_tiles * o_size), dtype=operand.dtype, buffer=nl.sbuf)
    for kt in range(k_tiles):
        k0 = kt * tile_k
        k_size = min(tile_k, k_dim - k0)
        columns = held[0:k_size, kt * o_size : (kt + 1) * o_size]
        nisa.dma_copy(dst=columns, src=operand[k0 : k0 + k_size, o0 : o0 + o_size])
    return held
