"""Named toolchains: one sweep's points run under several Neuron SDK environments on one host.

The spec's `[toolchains]` maps a name to an SDK environment's python; a point's `toolchain_name`
says which it runs under. Each name gets its own StageContext (`context.prepare` with that python as
`neuron_python`: the separate-interpreter path traces and compiles there, and that SDK's tools are
found next to it), so its rows carry that SDK's versions. The host is one host: the contexts share
the first one's NeuronCore leases and compile slots, so two toolchains never oversubscribe it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import Locations, StageContext, prepare


def spec_for(spec: SweepSpec, name: str) -> SweepSpec:
    """The spec as toolchain `name` runs it: its python as the SDK's interpreter ("" keeps the spec's)."""
    if not name:
        return spec
    python = next(t.python for t in spec.toolchains if t.name == name)
    return spec.model_copy(update={"neuron_python": python})


def prepare_toolchains(
    spec: SweepSpec, points: Iterable[Point], locations: Locations, stop: threading.Event
) -> tuple[dict[str, StageContext], str | None]:
    """One context per toolchain the points use, the first one's leases and compile slots shared."""
    names = list(dict.fromkeys(p.toolchain_name for p in points)) or [""]
    contexts: dict[str, StageContext] = {}
    notices: list[str] = []
    for name in names:
        ctx, notice = prepare(spec_for(spec, name), locations, stop)
        if contexts:
            first = next(iter(contexts.values()))
            object.__setattr__(ctx, "leasers", first.leasers)  # one host: one set of NeuronCore leases
            object.__setattr__(ctx, "compile_limiter", first.compile_limiter)  # and one set of compile slots
        contexts[name] = ctx
        if notice:
            notices.append(f"toolchain {name}: {notice}" if name else notice)
    return contexts, "\n".join(notices) or None
