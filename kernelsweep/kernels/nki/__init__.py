"""NKI implementations of the built-in kernels, imported only by the real toolchain's tracer.

They import `nki` (SDK 2.27+, NKI 0.2-0.6), which exists only with the Neuron SDK, so nothing else
in kernelsweep imports this package; the simulated tracer reads and runs them against its own model
of the language (kernelsweep.sim.nki.lang). They use only the stable `nki.isa` surface every `nki`
generation accepts: `nisa.dma_copy` for loads and stores, `nisa.nc_matmul(dst=psum, ...)`
accumulating over the contraction, `nisa.tensor_copy` out of PSUM, plain `range`, a Python list of
tiles where a block dimension used to be, and outputs in `nl.shared_hbm`.

Every loop handles ragged edges, so each definition's `check()` states only the limits that remain
(positive sizes, SBUF capacity, vector_add's tile shape). At LNC=2 the work is shared out with
`nl.program_id` / `nl.num_programs`; parameters are named as the definitions' inputs (the tracer
binds inputs by name).

Checked against NKI 0.7's migration notes (SDK 2.33; ../shared/reviews/nki-0.7-addendum.md F2-F4):
they use no dynamic loop construct (removed), no affine_range / sequential_range / static_range
(deprecated aliases of range), no `==` on NKI objects (whose meaning changed), and take their LNC from
nl.num_programs, which 0.7 derives from NEURON_LOGICAL_NC_CONFIG (the trace worker sets it). Every
loop is unrolled: these are naive reference kernels (README, Toolchains). On NKI 0.1 (SDK 2.27) the
MLP cannot trace: it reshapes shared_hbm tensors, which 0.1 refuses. Still open until a 0.7 host
answers it (addendum O3): whether `nl.program_id(0)` is a Python int there, as `range()` needs.
"""

__all__: list[str] = []  # no names: its modules are NKI sources, read by the tracers as files
