"""What the emulated engines charge that the performance model (sim.model) charges too: here, below
both, so the profile's views import the model without the NKI emulator behind it."""

# TensorE cycles a matmul spends besides streaming its moving columns through the PE array (loading
# the stationary tile): a modelling choice, so a matmul over a narrow moving tile costs more per MAC.
MATMUL_FIXED_CYCLES = 64
