"""out = a + b, one [partition_size, free_size] tile at a time.

The definition hands the kernel each vector viewed as [tiles, partition_size, free_size] (the same
bytes as the flat vector), so the swept tile shape is exactly the kernel's tile: two loads, one add
and one store per tile. At LNC=2 the tiles are dealt out to the two cores in turn.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add_kernel(a, b):
    tiles, parts, free = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for t in range(nl.program_id(0), tiles, nl.num_programs(0)):
        a_tile = nl.ndarray((parts, free), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((parts, free), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a[t])
        nisa.dma_copy(dst=b_tile, src=b[t])
        total = nl.ndarray((parts, free), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=total, data1=a_tile, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=out[t], src=total)
    return out
