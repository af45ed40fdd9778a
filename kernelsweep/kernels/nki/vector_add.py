"""out = a + b over a 1-D vector viewed as [128 partitions, n / 128] and processed in column tiles."""

import nki
import nki.language as nl

FREE_TILE = 512


@nki.jit
def vector_add_kernel(a, b):
    n = a.shape[0]
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    parts = nl.tile_size.pmax
    cols = n // parts
    a2, b2, out2 = a.reshape((parts, cols)), b.reshape((parts, cols)), out.reshape((parts, cols))
    step = min(cols, FREE_TILE)
    for j in nl.affine_range(cols // step):
        columns = nl.ds(j * step, step)
        total = nl.add(nl.load(a2[:, columns]), nl.load(b2[:, columns]))
        nl.store(out2[:, columns], value=total)
    return out
