"""Adapters for the external Neuron tools: one module per tool, all through `process.run_tool`."""
