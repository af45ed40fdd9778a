"""The simulator's performance model: a per-platform roofline with fixed and per-DMA overheads.

    t       = launch + dma_transfers * per_dma + max(compute, memory) + overlap * min(compute, memory)
    compute = flops / (peak(engine, dtype, cores) * compute_efficiency)
              + tensor_fixed_cycles / tensor_engine_clock                    (tensor engine only)
    memory  = hbm_traffic / (hbm_bandwidth(cores) * memory_efficiency)

`cores` is how many physical cores the kernel kept busy at once, as the simulated tracer measured
it by running the kernel as each program of the launch: lnc for a kernel that splits its work
evenly, 1 for one that does not split it (or cannot, as a single-tile vector add at LNC=2).
    hbm_traffic = hbm_bytes + (HBM_READ_AMPLIFICATION - 1) * input_bytes      (tensor engine)
                = hbm_bytes                                                  (vector engine)

`overlap` is the fraction of the shorter of compute and memory that is not hidden under the longer.

A kernel whose definition is `timed_from_trace` (the matmul, whose tunables change how it runs) is
timed from what its trace did instead of from its declared cost, through three stated terms:
    compute   x pe_penalty: the TensorE cycles its matmuls took (moving columns + MATMUL_FIXED_CYCLES
              each, whatever part of the 128 x 128 array the tile uses) over what the same MACs take
              in full 128 x 128 x 512 tiles, the tiles the calibrated efficiency describes
    memory    the HBM bytes its DMAs moved (re-reads included) in place of the amplification constant
    dma       its DMA count, spread over the core's DMA_ENGINES engines
so smaller tiles cost more TensorE passes and DMAs, and a loop order re-reads one operand or the other.
trn2's constants are a log-space least-squares fit to seed 000 (MLP totals and engine times) and
seed 004 (the vector-add tile sweep); trn1 and inf2 carry trn2's fit over, scaled by their own peaks
and clocks, and seed 002 (trn1) is only a consistency check. docs/calibration.md has the table of
every seed point against the prediction; `python benchmarks/calibrate.py` re-fits and prints it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

from kernelsweep.platforms import Platform
from kernelsweep.sim.nki.cycles import MATMUL_FIXED_CYCLES

HARDWARE_FLOPS_FACTOR = 1.0625  # transposes and padding the profiler counts beyond model FLOPs (seed 000)
HBM_READ_AMPLIFICATION = 1.92  # tiles re-read from HBM per input byte in seed 000's MLP (6,553,600 / 3,407,872)
PE_CELLS = 128 * 128  # the TensorE's processing elements
FULL_TILE_MOVING = 512  # moving columns of a full tile (gemm_moving_fmax)
DMA_ENGINES = 16  # "Each NeuronCore (v2-v4) is paired with 16 DMA engines" (NKI DMA overview)


@dataclass(frozen=True)
class Calibration:
    launch_seconds: float  # fixed cost of one kernel execution
    per_dma_seconds: float  # serial cost of each DMA transfer (descriptor setup), seed 004's tile sweep
    compute_efficiency: float  # fraction of the engine's peak FLOP rate reached
    memory_efficiency: float  # fraction of the logical core's HBM bandwidth reached
    overlap: float  # fraction of min(compute, memory) not hidden under the longer term
    tensor_fixed_cycles: float = 0.0  # TensorE pipeline fill / drain per kernel, in TensorE cycles


# Fitted by benchmarks/calibrate.py (seed 000 + seed 004, 11 points); rounded to 3 significant figures.
_TRN2 = Calibration(
    launch_seconds=12.8e-6,
    per_dma_seconds=0.561e-6,
    compute_efficiency=0.699,
    memory_efficiency=0.709,
    overlap=0.327,
    tensor_fixed_cycles=35_400,
)

CALIBRATION: dict[str, Calibration] = {
    "trn2": _TRN2,
    # No trn1 / inf2 seed measures one of our kernels: trn2's fit is carried over. Peak FLOPs, HBM
    # bandwidth, the vector clock and the TensorE clock (for tensor_fixed_cycles) come from each
    # platform, so those parts scale; launch and per-DMA costs are taken as is. Seed 002 (trn1) checks it.
    "trn1": replace(_TRN2),
    "inf2": replace(_TRN2),
}

# Where each platform's constants come from; printed by benchmarks/calibrate.py beside its fit.
CALIBRATION_SOURCE: dict[str, str] = {
    "trn2": "fitted: seed 000 (trn2 MLP) + seed 004 (trn2 vector add)",
    "trn1": "carried over from trn2, scaled by trn1's peaks and clocks; consistent with seed 002",
    "inf2": "carried over from trn2, scaled by inf2's peaks and clocks; no seed data",
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
    parallelism: float | None = None  # physical cores' worth of work the traced kernel ran at once
    code_factor: float = 1.0  # >1: the compiler emitted slower code (sim.config's COMPILER_SLOWDOWN)
    traced_hbm_bytes: int | None = None  # set for a kernel timed from its trace: what its DMAs moved
    traced_macs: int = 0
    traced_pe_cycles: int = 0

    @property
    def from_trace(self) -> bool:
        return self.traced_hbm_bytes is not None

    @property
    def pe_penalty(self) -> float:
        """TensorE cycles taken over what full tiles would take for the same MACs (1 for full tiles)."""
        if not self.from_trace or not self.traced_macs:
            return 1.0
        full = self.traced_macs / PE_CELLS / FULL_TILE_MOVING * (FULL_TILE_MOVING + MATMUL_FIXED_CYCLES)
        return self.traced_pe_cycles / full

    @property
    def cores(self) -> float:
        """What the time is spread over: the kernel's own parallelism (1 for a kernel that is not
        LNC-aware, or whose work cannot be split), else the whole logical core."""
        return self.lnc if self.parallelism is None else self.parallelism


@dataclass(frozen=True)
class Timing:
    total: float
    compute: float
    memory: float
    dma_overhead: float


def published(value: float | None, what: str) -> float:
    """A platform fact the model needs; platforms whose fact is unpublished are refused before this."""
    if value is None:
        raise ValueError(f"the simulator needs the {what}, which is not published for this platform")
    return value


def peak_rate(w: Workload) -> float:
    if w.engine == "vector":
        return published(w.platform.vector_peak_flops(1), "Vector Engine clock") * w.cores
    return w.platform.peak_flops(w.dtype, 1) * w.cores


def hbm_traffic(w: Workload) -> float:
    """HBM bytes actually moved: tensor-engine kernels re-read input tiles (seed 000's hbm_read_bytes)."""
    if w.engine == "tensor":
        return w.hbm_bytes + (HBM_READ_AMPLIFICATION - 1) * w.input_bytes
    return float(w.hbm_bytes)


def model_timing(w: Workload, cal: Calibration) -> Timing:
    """The noiseless model under explicit constants (benchmarks/calibrate.py fits through this)."""
    compute = w.flops / (peak_rate(w) * cal.compute_efficiency) * w.pe_penalty
    if w.engine == "tensor":
        compute += cal.tensor_fixed_cycles / published(w.platform.tensor_engine_clock_hz, "TensorE clock")
    traffic = w.traced_hbm_bytes if w.traced_hbm_bytes is not None else hbm_traffic(w)
    memory = traffic / (w.platform.hbm_bandwidth(1) * w.cores * cal.memory_efficiency)
    dma = w.dma_transfers * cal.per_dma_seconds / (DMA_ENGINES if w.from_trace else 1)
    total = cal.launch_seconds + dma + max(compute, memory) + cal.overlap * min(compute, memory)
    return Timing(total=total, compute=compute, memory=memory, dma_overhead=dma)


def predict(w: Workload, jitter_key: str = "", jitter: float = 0.01, run_factor: float = 1.0) -> Timing:
    """Seconds for one execution; `jitter_key` makes the per-repeat noise deterministic, and
    `run_factor` is the shift of the whole run the capture belongs to (sim.noise)."""
    timing = model_timing(w, CALIBRATION[w.platform.name])
    noise = (1 + jitter * unit_normal(jitter_key)) * run_factor
    return replace(timing, total=timing.total * w.code_factor * noise)


def unit_normal(key: str) -> float:
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
        "neuroncore_cycle_count": int(total * published(w.platform.profiler_clock_hz, "profiler clock")),  # 54307
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
