"""Budgeted search over a kernel's tunables, per shape (`search` in a kernel block of the spec)."""
