"""The Prefect flows and the `kernelsweep` CLI, installed as `kernelsweep.flows`; the folder stays at the
repository's top level (DESIGN.md), and a user's own `flows/` never meets it. See flows/README.md.

Its face is empty: the flows (`sweep`, `kernel_run`, `report`, `compile_shard`, `fleet`) are reached by
their modules, whose names they share and which the deployments name as entrypoints, and the CLI by
`kernelsweep.flows.cli`.
"""

__all__: list[str] = []
