"""This host as the stages see it: which platform family it is, the stage context set up on it (toolchain,
artifact store, NeuronCore leases, compile slots), and one context per named toolchain it runs."""
