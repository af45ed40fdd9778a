"""A simulated Neuron toolchain: stand-in `neuronx-cc`, `neuron-profile`/`neuron-explorer` and
`neuron-ls` that speak the real argv and output formats, so the production adapters are what the
tests exercise, and simulated NKI tracers (sim.tracer) that run a kernel's real source on a model of
one NKI generation (sim.nki_*), refusing what that generation refuses. The tools run as
`python -m kernelsweep.sim.<tool>`, the tracers in the production trace worker; never installed on PATH.

Everything it makes says it is simulated: version strings carry `+kernelsweep.sim`, NEFF info and
profiles carry `is_simulation`. Faults (a busy core, a hung capture, a compile error) can be
injected through KERNELSWEEP_SIM_FAULTS (sim.config, sim.faults) to test failure handling.

Its face is the versions everything simulated carries: its modules import them from here, and the
stand-in tools start from its modules (`python -m kernelsweep.sim.<tool>`), so it imports none of them.
"""

__all__ = ["COMPILER_VERSION", "PROFILER_VERSION", "RUNTIME_VERSION", "SIM_VERSION_SUFFIX"]

SIM_VERSION_SUFFIX = "+kernelsweep.sim"
COMPILER_VERSION = "2.21.33363.0" + SIM_VERSION_SUFFIX
RUNTIME_VERSION = "2.23.112.0" + SIM_VERSION_SUFFIX
PROFILER_VERSION = "2.29.18.0" + SIM_VERSION_SUFFIX
