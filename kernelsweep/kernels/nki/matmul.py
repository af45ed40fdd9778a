"""out[M, N] = lhsT[K, M].T @ rhs[K, N], tiled 128 (M) x 128 (K) x 512 (N), accumulating in PSUM."""

import nki
import nki.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    tile_m = min(m_dim, nl.tile_size.gemm_stationary_fmax)  # 128
    tile_k = min(k_dim, nl.tile_size.pmax)  # 128
    tile_n = min(n_dim, nl.tile_size.gemm_moving_fmax)  # 512
    for m in nl.affine_range(m_dim // tile_m):
        for n in nl.affine_range(n_dim // tile_n):
            acc = nl.zeros((tile_m, tile_n), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // tile_k):
                stationary = nl.load(lhsT[k * tile_k : (k + 1) * tile_k, m * tile_m : (m + 1) * tile_m])
                moving = nl.load(rhs[k * tile_k : (k + 1) * tile_k, n * tile_n : (n + 1) * tile_n])
                acc += nl.matmul(stationary, moving, transpose_x=True)
            result = nl.copy(acc, dtype=out.dtype)
            nl.store(out[m * tile_m : (m + 1) * tile_m, n * tile_n : (n + 1) * tile_n], value=result)
    return out
