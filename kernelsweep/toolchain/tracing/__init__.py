"""Tracing a kernel: NKI source -> IR (and, on current SDKs, the NEFF), in a worker process per point.

The rooms: `request` (what a worker is given and hands back), `job` (running a worker under a
timeout, and the run's tracer choice), `interpreter` (the Neuron SDK's Python it runs under),
`tracers` (one adapter per NKI API generation AWS has shipped), `calls` (what every adapter does
the same way: signature probes, result shapes, output names), `simulate` (nki.simulate, for
`--toolchain cpu`), `worker` (the process itself).

The names below load their module on first use (`public_face`): the trace worker, started once per
point, imports `request` and `calls` only, and loading `job` with it (logging, tarfile, threading, the
interpreter probes) cost it about a fifth of its start-up CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.toolchain.tracing.job import JOB_FILE, TracerChoice, probe, trace, tracer_label, unpack
    from kernelsweep.toolchain.tracing.request import (
        RESULT_FILE,
        Fallback,
        TensorSpec,
        TraceOutput,
        TraceProducts,
        Tracer,
        TraceRequest,
        TracerProbe,
        TracerStatus,
        pack,
    )

__all__ = [
    "JOB_FILE",
    "RESULT_FILE",
    "Fallback",
    "TensorSpec",
    "TraceOutput",
    "TraceProducts",
    "Tracer",
    "TracerChoice",
    "TracerProbe",
    "TraceRequest",
    "TracerStatus",
    "pack",
    "probe",
    "trace",
    "tracer_label",
    "unpack",
]
__getattr__ = public_face(__name__, __file__)
