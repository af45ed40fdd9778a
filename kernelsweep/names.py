"""The file names the Neuron tools read and write, in one place.

A stage fetches each artifact into its scratch folder under the name the next tool expects, and
`kernelsweep lineage` fetches a row's artifacts under the same names, so a fetched NEFF and NTFF
open in the profiler again as they are.
"""

from __future__ import annotations

import re

_NOT_SLUG = re.compile(r"[^a-z0-9]+")

IR = "ir.tar"  # everything a tracer wrote (the frontend's artifacts, or penguin.py and its weights), as one tar
PENGUIN = "penguin.py"  # the legacy tracer's output and `neuronx-cc compile`'s model file (seed 000)
NEFF = "file.neff"  # what `neuronx-cc compile` writes by default (`--output`)
NTFF = "profile.ntff"  # the capture session file (`-s`)
KERNEL_SOURCE = "kernel_source.py"


def slug(text: str) -> str:
    """Lower-case letters and digits joined by single hyphens: point ids, run keys, artifact keys."""
    return _NOT_SLUG.sub("-", text.lower()).strip("-")


def input_file(name: str) -> str:
    """`inp-<name>-000.bin`: raw C-order bytes of one NEFF input (seed 000)."""
    return f"inp-{name}-000.bin"


def output_file(name: str) -> str:
    return f"out-{name}.bin"
