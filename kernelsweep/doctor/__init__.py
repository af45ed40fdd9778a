"""`kernelsweep doctor`: `host_checks` (what of the Neuron toolchain this host has), and `--smoke`:
`smoke` runs one point through every tool, `smoke_steps` holds its shared state and simpler steps,
`smoke_render` shows them on the terminal and in a report file.
"""
