"""Hardware facts for each Neuron platform, and the roofline bound they imply.

Figures are per NeuronCore from the Neuron architecture docs (reference section 7). A kernel runs on
one *logical* core; on trn2 the default LNC=2 fuses two physical cores, so peak compute and HBM
bandwidth double. Roofline numbers are always reported for the logical core a capture used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

PlatformName = Literal["trn1", "trn2", "inf2"]
PLATFORM_NAMES: tuple[str, ...] = get_args(PlatformName)


@dataclass(frozen=True)
class Roofline:
    """The fastest a point could run on its logical core, and which resource sets that floor."""

    seconds: float
    bound: Literal["compute", "memory"]


@dataclass(frozen=True)
class Platform:
    name: str
    neuroncore_version: str
    default_lnc: int
    supported_lnc: tuple[int, ...]
    tensor_engine_clock_hz: float
    profiler_clock_hz: float
    peak_tflops: dict[str, float]  # dense, per physical core, by dtype
    hbm_bandwidth_gbps_per_core: float  # GB/s, per physical core
    hbm_bytes_per_chip: int
    compiler_target: str

    def peak_flops(self, dtype: str, lnc: int) -> float:
        """Peak FLOP/s of one logical core for this dtype."""
        tflops = self.peak_tflops.get(dtype)
        if tflops is None:
            raise KeyError(f"no peak figure for dtype {dtype!r} on {self.name}")
        return tflops * 1e12 * lnc

    def hbm_bandwidth(self, lnc: int) -> float:
        """HBM bytes/s available to one logical core."""
        return self.hbm_bandwidth_gbps_per_core * 1e9 * lnc

    def roofline(self, flops: float, hbm_bytes: float, dtype: str, lnc: int) -> Roofline:
        """Lower bound on run time: the slower of pure compute and pure HBM traffic."""
        compute_s = flops / self.peak_flops(dtype, lnc)
        memory_s = hbm_bytes / self.hbm_bandwidth(lnc)
        return Roofline(max(compute_s, memory_s), "compute" if compute_s >= memory_s else "memory")

    def compile_lnc(self, lnc: int) -> int | None:
        """The `--lnc` to compile with: None where the target takes no such flag (trn1 and inf2
        answer it with NCC_EARG001), else `lnc`, refused when the platform cannot run it."""
        if lnc not in self.supported_lnc:
            raise ValueError(f"{self.name} runs at LNC {', '.join(map(str, self.supported_lnc))}, not {lnc}")
        return lnc if len(self.supported_lnc) > 1 else None


_NC_V2_TFLOPS = {"bfloat16": 91.75, "float16": 91.75, "float32": 22.94}

PLATFORMS: dict[str, Platform] = {
    "trn1": Platform(
        name="trn1",
        neuroncore_version="v2",
        default_lnc=1,
        supported_lnc=(1,),
        tensor_engine_clock_hz=2.8e9,
        profiler_clock_hz=1.4e9,
        peak_tflops=_NC_V2_TFLOPS,
        hbm_bandwidth_gbps_per_core=410.0,  # 820 GB/s per chip, 2 cores
        hbm_bytes_per_chip=32 * 2**30,
        compiler_target="trn1",
    ),
    "inf2": Platform(
        name="inf2",
        neuroncore_version="v2",
        default_lnc=1,
        supported_lnc=(1,),
        tensor_engine_clock_hz=2.8e9,
        profiler_clock_hz=1.4e9,
        peak_tflops=_NC_V2_TFLOPS,
        hbm_bandwidth_gbps_per_core=410.0,
        hbm_bytes_per_chip=32 * 2**30,
        compiler_target="inf2",
    ),
    "trn2": Platform(
        name="trn2",
        neuroncore_version="v3",
        default_lnc=2,
        supported_lnc=(1, 2),
        tensor_engine_clock_hz=2.4e9,
        profiler_clock_hz=1.2e9,
        peak_tflops={"bfloat16": 78.64, "float16": 78.64, "float32": 19.66},
        hbm_bandwidth_gbps_per_core=362.5,  # 2.9 TB/s per chip, 8 physical cores
        hbm_bytes_per_chip=96 * 2**30,
        compiler_target="trn2",
    ),
}


def get_platform(name: str) -> Platform:
    try:
        return PLATFORMS[name]
    except KeyError:
        raise KeyError(f"unknown platform {name!r}; expected one of {', '.join(PLATFORM_NAMES)}") from None
