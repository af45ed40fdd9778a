"""kernelsweep: performance sweeps of NKI kernels on AWS Trainium and Inferentia.

The core (this package, minus `kernelsweep.flows` and `kernelsweep.tasks`) is plain Python and never
imports Prefect: every stage runs and is tested without an orchestrator. `kernelsweep.tasks` wraps
each stage in a Prefect task and `kernelsweep.flows` chains them into flows and the CLI. Downstream
readers need only `kernelsweep.results.read`.
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # Resolved on first use: importlib.metadata costs ~20 ms, paid otherwise by every simulated tool call.
    if name == "__version__":
        from importlib import metadata

        try:
            return metadata.version("kernelsweep")
        except metadata.PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'kernelsweep' has no attribute {name!r}")
