"""What a nightly fleet run re-checks: its spec's kernels, each with the spec's `recheck_tuned` search.

The re-check on a new SDK (kernelsweep.tuned.recheck) reads a spec whose kernel blocks search: it
re-checks the stored bests of the kernels searched, and a key whose best flipped is re-tuned with its
block's search. The nightly spec searches nothing (the fleet shards fixed points), so its
`recheck_tuned` table is the search every block with tunables gets for the re-check, and the switch:
without it, or while the store holds no best of the spec's kernels on its platforms, nothing is
re-checked and no host is asked for anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelsweep.kernels import load_kernel
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.models import SweepSpec


def recheck_spec(spec: SweepSpec, entries: Sequence[dict[str, Any]]) -> SweepSpec | None:
    """The spec the re-check runs (the blocks of kernels with a stored best, searching), or None."""
    if spec.recheck_tuned is None:
        return None
    stored = {(e["key"]["kernel"], e["key"]["platform"]) for e in entries}
    search = spec.recheck_tuned.model_dump(mode="json")
    blocks = []
    for block in spec.kernels:
        definition = load_kernel(block.ref)
        if definition.tunables and any((definition.name, p) in stored for p in spec.platforms):
            blocks.append(block.model_dump(mode="json") | {"search": search, "coverage": {}})
    if not blocks:
        return None
    data = spec.model_dump(mode="json", exclude={"kernels", "recheck_tuned"})
    return parse_spec({**data, "kernels": blocks}, source=f"{spec.name}: recheck_tuned")
