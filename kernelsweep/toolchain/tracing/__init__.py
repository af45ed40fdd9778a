"""Tracing a kernel: NKI source -> IR (and, on current SDKs, the NEFF), in a worker process per point.

The rooms: `job` (the request a worker gets, what it hands back, and running it under a timeout),
`tracers` (one adapter per NKI API generation AWS has shipped), `calls` (what every adapter does
the same way: signature probes, output names), `worker` (the process itself).
"""

from kernelsweep.toolchain.tracing.job import (
    JOB_FILE,
    RESULT_FILE,
    TensorSpec,
    TraceOutput,
    TraceProducts,
    Tracer,
    TraceRequest,
    TracerProbe,
    TracerStatus,
    pack,
    probe,
    trace,
    unpack,
)

__all__ = [
    "JOB_FILE",
    "RESULT_FILE",
    "TensorSpec",
    "TraceOutput",
    "TraceProducts",
    "Tracer",
    "TracerProbe",
    "TraceRequest",
    "TracerStatus",
    "pack",
    "probe",
    "trace",
    "unpack",
]
