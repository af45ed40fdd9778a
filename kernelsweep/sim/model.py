"""The simulator's performance model: a per-platform roofline with fixed and per-DMA overheads.

    t = launch + dma_transfers * per_dma + max(compute, memory) + overlap * min(compute, memory)
    compute = flops / (peak(engine, dtype, lnc) * compute_efficiency)
    memory  = hbm_bytes / (hbm_bandwidth(lnc) * memory_efficiency)

Constants are fitted to the seeds' measurements (seed 000's trn2 MLP, seed 004's trn2 vector add
tile sweep); docs/calibration.md lists each seed point against the prediction.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from kernelsweep.platforms import Platform

VECTOR_LANES = 128
VECTOR_CLOCK_HZ = {"v2": 1.12e9, "v3": 0.96e9}
HARDWARE_FLOPS_FACTOR = 1.0625  # transposes and padding the profiler counts beyond model FLOPs (seed 000)
HBM_READ_AMPLIFICATION = 1.92  # tiles re-read from HBM per input byte in seed 000's MLP


@dataclass(frozen=True)
class Calibration:
    launch_seconds: float
    per_dma_seconds: float
    compute_efficiency: float
    memory_efficiency: float
    overlap: float


CALIBRATION: dict[str, Calibration] = {
    "trn2": Calibration(15e-6, 0.6e-6, 0.45, 0.50, 0.5),
    "trn1": Calibration(15e-6, 0.6e-6, 0.45, 0.50, 0.5),
    "inf2": Calibration(15e-6, 0.6e-6, 0.45, 0.50, 0.5),
}


@dataclass(frozen=True)
class Workload:
    platform: Platform
    lnc: int
    dtype: str
    flops: int
    hbm_bytes: int
    input_bytes: int
    output_bytes: int
    dma_transfers: int
    engine: str


@dataclass(frozen=True)
class Timing:
    total: float
    compute: float
    memory: float
    dma_overhead: float


def peak_rate(w: Workload) -> float:
    if w.engine == "vector":
        return VECTOR_LANES * VECTOR_CLOCK_HZ[w.platform.neuroncore_version] * w.lnc
    return w.platform.peak_flops(w.dtype, w.lnc)


def predict(w: Workload, jitter_key: str = "", jitter: float = 0.01) -> Timing:
    """Seconds for one execution; `jitter_key` makes run-to-run noise deterministic."""
    cal = CALIBRATION[w.platform.name]
    compute = w.flops / (peak_rate(w) * cal.compute_efficiency)
    memory = w.hbm_bytes / (w.platform.hbm_bandwidth(w.lnc) * cal.memory_efficiency)
    dma = w.dma_transfers * cal.per_dma_seconds
    total = cal.launch_seconds + dma + max(compute, memory) + cal.overlap * min(compute, memory)
    return Timing(
        total=total * (1 + jitter * _unit_normal(jitter_key)), compute=compute, memory=memory, dma_overhead=dma
    )


def _unit_normal(key: str) -> float:
    """A deterministic N(0,1)-ish draw from a string (Box-Muller on two hash-derived uniforms)."""
    if not key:
        return 0.0
    digest = hashlib.sha256(key.encode()).digest()
    u1 = (int.from_bytes(digest[:8], "big") + 1) / 2**64
    u2 = int.from_bytes(digest[8:16], "big") / 2**64
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)


def summary(w: Workload, timing: Timing) -> dict[str, float | int]:
    """Summary fields in the profiler's own names and units (seconds; percents as 0-100)."""
    total = timing.total
    tensor = timing.compute if w.engine == "tensor" else 0.02 * total
    vector = timing.compute if w.engine == "vector" else 0.21 * total
    engines = {
        "tensor": tensor,
        "vector": min(vector, total),
        "scalar": 0.14 * total,
        "gpsimd": 0.10 * total,
        "sync": 0.09 * total,
    }
    dma_active = min(timing.memory + timing.dma_overhead, total)
    hardware_flops = int(w.flops * HARDWARE_FLOPS_FACTOR)
    transpose_flops = hardware_flops - w.flops if w.engine == "tensor" else 0
    hbm_read = int(w.input_bytes * (HBM_READ_AMPLIFICATION if w.engine == "tensor" else 1.0))
    peak = w.platform.peak_flops(w.dtype, w.lnc)
    record: dict[str, float | int] = {
        "total_time": total,
        "neuroncore_cycle_count": int(round(total * w.platform.profiler_clock_hz)),
        "model_flops": w.flops,
        "hardware_flops": hardware_flops,
        "transpose_flops": transpose_flops,
        "mm_arithmetic_intensity": (hardware_flops - transpose_flops) / max(hbm_read + w.output_bytes, 1),
        "dma_active_time": dma_active,
        "dma_active_time_percent": 100 * dma_active / total,
        "dma_transfer_count": w.dma_transfers,
        "dma_transfer_total_bytes": w.input_bytes + w.output_bytes,
        "inputs_outputs_weights_size_bytes": w.input_bytes + w.output_bytes,
        "hbm_read_bytes": hbm_read,
        "hbm_write_bytes": w.output_bytes,
        "mbu_estimated_percent": 100 * (hbm_read + w.output_bytes) / total / w.platform.hbm_bandwidth(w.lnc),
        "mfu_estimated_percent": 100 * w.flops / (peak * total) if w.engine == "tensor" else 0.0,
        "mfu_max_achievable_estimated_percent": 100
        * (w.flops / peak)
        / max(w.flops / peak, w.hbm_bytes / w.platform.hbm_bandwidth(w.lnc)),
        "matmul_instruction_count": max(1, w.flops // (2 * 128 * 128 * 512)) if w.engine == "tensor" else 0,
        "event_count": 2 * w.dma_transfers + 1,
        "trace_count": 4 * w.dma_transfers + 2,
    }
    for engine, active in engines.items():
        record[f"{engine}_engine_active_time"] = active
        record[f"{engine}_engine_active_time_percent"] = 100 * active / total
    busiest = max([dma_active, *engines.values()])
    record["total_active_time"] = busiest
    record["total_active_time_percent"] = 100 * busiest / total
    return record


def compile_seconds(flops: int) -> float:
    """Emulated neuronx-cc wall time: ~4 s for seed 000's MLP, growing slowly with kernel size."""
    return 2.5 + 0.2 * math.log2(max(flops, 2) / 1e6) if flops > 1e6 else 2.5
