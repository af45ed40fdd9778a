"""NKI kernels that ask the installed NKI a question; `kernelsweep doctor --smoke` traces them.

`plus_equals_matmul` accumulates with `acc += nl.matmul(...)`, as the built-in kernels did before
they moved to `nisa.nc_matmul(dst=psum)`: no NKI document says whether the 0.3-0.6 front end
accepts `+=` on an NkiTensor (real-host audit, section 7), and only tracing it on a host answers.
"""

import nki
import nki.language as nl


@nki.jit
def plus_equals_matmul(lhsT, rhs):
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((lhsT.shape[1], rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in range(lhsT.shape[0] // nl.tile_size.pmax):
        rows = nl.ds(k * nl.tile_size.pmax, nl.tile_size.pmax)
        acc += nl.matmul(nl.load(lhsT[rows, :]), nl.load(rhs[rows, :]), transpose_x=True)
    nl.store(out, value=nl.copy(acc, dtype=out.dtype))
    return out
