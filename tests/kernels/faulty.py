"""Kernel definitions that fail on purpose, to test failure rows."""

from kernelsweep.kernels.vector_add import VectorAdd


class CrashesOnDevice(VectorAdd):
    """Passes every static check; its reference (run by the sim's capture) raises."""

    name = "crashes_on_device"

    def reference(self, inputs, params):
        raise RuntimeError("simulated device fault: execution aborted")


crashes_on_device = CrashesOnDevice()
not_a_kernel = object()
