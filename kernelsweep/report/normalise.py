"""Each point as a share of its own platform's peak, so trn1, trn2 and inf2 compare directly.

A microsecond on trn2 (LNC=2, 2.9 TB/s per chip) and one on inf2 are not the same achievement; a
percentage of what the logical core could do at best is. Three shares, all 0-100: of the dense
compute peak for the dtype (= MFU), of the HBM bandwidth, and of the roofline bound at the point's
arithmetic intensity (the better of the two, and what "% of peak" means in the report). The
roofline chart draws the same thing with each platform's intensity scaled by its own ridge point,
so all platforms share one roof.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelsweep.platforms import PLATFORMS
from kernelsweep.report.load import ReportRow
from kernelsweep.sweepspec.shapes import natural_order


@dataclass(frozen=True)
class Normalised:
    result: ReportRow
    intensity: float | None  # cost-model FLOPs per HBM byte
    ridge: float | None  # the intensity where this platform's roofs meet (peak FLOP/s / HBM byte/s)
    compute_percent: float | None  # of the dense peak for the dtype at the point's LNC (= MFU)
    bandwidth_percent: float | None  # of the logical core's HBM bandwidth
    roofline_percent: float | None  # of the roofline bound: the share of this platform's peak

    @property
    def relative_intensity(self) -> float | None:
        if self.intensity is None or not self.ridge:
            return None
        return self.intensity / self.ridge


def normalise(result: ReportRow) -> Normalised:
    platform = PLATFORMS.get(result.platform)
    lnc = result.lnc or (platform.default_lnc if platform else 1)
    flops, hbm = result.cost_flops, result.cost_hbm_bytes
    intensity = flops / hbm if flops and hbm else None
    ridge = bandwidth = None
    if platform and result.dtype in platform.peak_tflops:
        ridge = platform.peak_flops(result.dtype, lnc) / platform.hbm_bandwidth(lnc)
    seconds = result.latency_us * 1e-6 if result.ok and result.latency_us else None
    if platform and seconds and hbm:
        bandwidth = 100 * hbm / seconds / platform.hbm_bandwidth(lnc)
    return Normalised(
        result=result,
        intensity=intensity,
        ridge=ridge,
        compute_percent=result.mfu_percent if result.ok else None,
        bandwidth_percent=bandwidth,
        roofline_percent=result.roofline_percent if result.ok else None,
    )


@dataclass(frozen=True)
class CrossRow:
    """One (kernel, shape, dtype) across every platform it ran on."""

    kernel: str
    shape: str
    dtype: str
    by_platform: dict[str, Normalised]

    def fastest(self) -> str | None:
        timed = {p: n.result.latency_us for p, n in self.by_platform.items() if n.result.ok and n.result.latency_us}
        return min(timed, key=lambda p: timed[p]) if timed else None


def cross_platform(latest: list[ReportRow]) -> tuple[list[str], list[CrossRow]]:
    """(platforms present, one row per kernel x shape x dtype) from the latest rows; tunables and a named
    toolchain stay apart (after the shape); a platform swept at several LNC settings shows its default."""
    platforms = sorted({r.platform for r in latest})
    rows: dict[tuple[str, str, str], dict[str, Normalised]] = {}
    for result in sorted(latest, key=lambda r: r.lnc == _default_lnc(r.platform)):  # the default LNC last: it stays
        shape = " ".join(p for p in (result.shape, result.tunables, result.toolchain_name) if p)
        rows.setdefault((result.kernel, shape, result.dtype), {})[result.platform] = normalise(result)
    ordered = sorted(rows.items(), key=lambda item: natural_order(item[0]))
    return platforms, [CrossRow(k, s, d, by) for (k, s, d), by in ordered]


def _default_lnc(platform: str) -> int:
    known = PLATFORMS.get(platform)
    return known.default_lnc if known else 1
