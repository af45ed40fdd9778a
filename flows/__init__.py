"""The Prefect flows and the `kernelsweep` CLI, installed as `kernelsweep.flows`; the folder stays at the
repository's top level (DESIGN.md), and a user's own `flows/` never meets it. See flows/README.md."""
