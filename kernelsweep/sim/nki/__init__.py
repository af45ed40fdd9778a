"""The simulated NKI language: what the stand-in tracer runs a kernel's real source on.

`generations` holds each SDK generation's rules, `modules` builds its `nki.language` / `nki.isa`,
`lang` models the instructions (work counts, optional values through `values`), `tensor` the
tensors and tiles, and `trace` runs one kernel on them; `cycles` holds what the engines charge
that the performance model (sim.model) charges too.
"""
