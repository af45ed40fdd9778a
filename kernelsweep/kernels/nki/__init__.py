"""NKI implementations of the built-in kernels, imported only by the real toolchain's tracer.

They import `nki`, which exists only with the Neuron SDK, so nothing else in kernelsweep imports
this package. No Neuron device is available where this repository is developed and tested: these
kernels are traced and compiled only on Neuron hosts. Parameters are named as the definitions'
inputs (the tracer binds inputs by name); tile shapes derive from the tensor shapes.
"""
