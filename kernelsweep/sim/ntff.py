"""The simulator's NTFF: a magic line and a JSON record of what ran, for `view` to model."""

from __future__ import annotations

import json
from pathlib import Path

MAGIC = b"NTFF-KERNELSWEEP-SIM\n"
NTFF_VERSION = 2


def write_ntff(path: Path, record: dict) -> None:
    path.write_bytes(MAGIC + json.dumps({"ntff_version": NTFF_VERSION, "is_simulation": True, **record}).encode())


def read_ntff(path: Path) -> dict:
    raw = Path(path).read_bytes()
    if not raw.startswith(MAGIC):
        raise ValueError(f"{path}: not an NTFF written by the simulated toolchain")
    record = json.loads(raw[len(MAGIC) :])
    if record.get("ntff_version") != NTFF_VERSION:
        raise ValueError(  # the real tool's words (aws-neuron-sdk#1007)
            f"NTFF version {record.get('ntff_version')} is not supported in this version of the tool "
            f"(supported: {NTFF_VERSION} - {NTFF_VERSION}). Please upgrade aws-neuronx-tools."
        )
    return record
