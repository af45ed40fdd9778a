"""How the simulated runtime fails: as Neuron runtime log lines (`... ERROR   <function>  <text>`)."""

from __future__ import annotations


class RuntimeFailure(Exception):
    """A capture failure; each line of the message is printed as one runtime log line."""


def nrt(function: str, text: str) -> str:
    return f"{function:<44}{text}"


def busy(requested: str) -> RuntimeFailure:
    """The busy-core error, documented (reference section 4), and the init failure that follows it."""
    return RuntimeFailure(
        nrt("NRT:nrt_allocate_neuron_cores", f"NeuronCore(s) not available - Requested:{requested} Available:0")
        + "\n"
        + nrt("NRT:nrt_init", "nrt_init failed. Status = 1")
    )
