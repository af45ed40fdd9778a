"""What each stage hands the next: small frozen references, never arrays (kernelsweep.stages)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelsweep.correctness import Correctness
from kernelsweep.hotspots import Hotspots
from kernelsweep.profiles.metrics import LatencyStats, ProfileMetrics
from kernelsweep.stores.artifacts import ArtifactRef
from kernelsweep.toolchain.compile_cost import CompileCost
from kernelsweep.toolchain.iterations import IterationTiming


@dataclass(frozen=True)
class TraceResult:
    kernel_source: ArtifactRef
    ir: ArtifactRef
    tracer: str  # tracer id
    seconds: float
    cache_hit: bool = False
    neff: ArtifactRef | None = None  # set when the tracing API compiled too (every current NKI route)
    nki_version: str | None = None
    compile_seconds: float | None = None  # the compile inside the tracing call; None on a cache hit
    compile_options: str | None = None  # what the tracer asked the compiler for (JSON)
    nki_compiler_frontend: str | None = None
    model: ModelRun | None = None  # `--toolchain cpu` only
    fell_through: tuple[str, ...] = ()  # tracers this run found unusable, which this one stands in for
    nki_source: ArtifactRef | None = None  # the NKI kernel's source file: what hotspots' line numbers point into
    compile_cost: CompileCost | None = None  # of the compile inside the tracing call; None on a cache hit
    compile_host: str | None = None  # the host that compiled `neff` (its cache entry's, on a hit); None: unknown
    debug_info: bool | None = None  # `neff` was compiled with NKI_DEBUG_INFO=True; None: no NEFF, or an older entry
    alloc_fallback: bool | None = None  # NKI's allocator fell back to neuronx-cc's compiling `neff`


@dataclass(frozen=True)
class ModelRun:
    """`--toolchain cpu`: what stands in for the device. The simulator's NEFF of the point is what its
    profiler captures and times (the real NEFF stays the row's `neff`); the outputs nki.simulate
    computed from the real kernel are what the correctness check reads, `note` says why there are none."""

    neff: ArtifactRef
    outputs: dict[str, ArtifactRef]
    note: str | None = None


@dataclass(frozen=True)
class CompileResult:
    neff: ArtifactRef
    seconds: float | None
    cache_hit: bool = False
    compile_options: str | None = None
    model: ModelRun | None = None
    compile_cost: CompileCost | None = None
    compile_host: str | None = None  # the host that compiled `neff`: this one, or the one whose NEFF the store had
    debug_info: bool | None = None  # what shaped the NEFF: compiled with NKI_DEBUG_INFO=True
    alloc_fallback: bool | None = None  # NKI's allocator fell back to neuronx-cc's; None: not known


@dataclass(frozen=True)
class InputsResult:
    inputs: dict[str, ArtifactRef]


@dataclass(frozen=True)
class CaptureResult:
    ntffs: list[ArtifactRef]  # one per repeat
    outputs: dict[str, ArtifactRef]
    visible_cores: str
    seconds: float
    dge_notifs: tuple[bool, ...] = ()  # per repeat: whether it collected DGE notifications
    notes: tuple[str, ...] = ()  # fallbacks taken (DGE notifications dropped after a timeout)
    iterations: IterationTiming | None = None  # `capture.iterations` executions timed in one tool process
    dropped: str | None = None  # why a search trial was captured no further (kernelsweep.search.dropping)


@dataclass(frozen=True)
class ExtractResult:
    ntff: ArtifactRef  # the repeat whose profile the row reports
    profile: ArtifactRef
    metrics: ProfileMetrics
    correctness: Correctness | None  # None: nothing to check (`--toolchain cpu` without nki.simulate)
    latency: LatencyStats
    timing_source: str = "device"  # "device", or "simulator" (the simulator's model timed it)
    correctness_source: str = "device"  # "device", "simulator", "nki.simulate", or "unchecked: <why>"
    dge_notifs: bool | None = None  # of the reported repeat's capture
    dma_warning: str | None = None  # the view's or the profile's: its DMA figures may be inaccurate
    hotspots: Hotspots | None = None  # instruction time by source line (`capture.hotspots`)
    dropped: str | None = None  # the capture's: why the search trial was captured no further
