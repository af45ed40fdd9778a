"""Before the smoke's steps, on a host whose family nothing names: does its runtime load a NEFF of
the platform the smoke is about to use?

The smoke compiles for one family (`--platform`, else this host's, else trn2). Where neither the
DMI nor neuron-ls names an instance type (neuron-ls before 2.34 mostly does not; a host off EC2 has
no DMI name), a host of another family only shows it when the runtime refuses the NEFF at load:
every capture step then fails alike and the busy-core step asks for the wording to be reported.
One compile and one capture, up front, turn that into one line naming the mismatch and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelsweep.doctor.smoke_steps import Smoke
from kernelsweep.errors import KernelsweepError
from kernelsweep.kernels import load_kernel
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain import profiler, tracing
from kernelsweep.toolchain.resolve import Toolchain

PROBE_TIMEOUT_SECONDS = 900.0
REFUSED_AT_LOAD = "NeffLoad"  # kernelsweep.toolchain.failures: a NEFF the runtime will not load


def refused_platform(toolchain: Toolchain, point: Point, workdir: Path, asked: bool) -> str | None:
    """One line when this host's runtime refuses, at load, a NEFF built for `point.platform`; None
    when it loads it, or when no NEFF could be built or captured for another reason (the smoke's own
    steps then say what)."""
    state = Smoke(toolchain, point, workdir)  # the smoke's own inputs and compile path
    kernel = tracing.TraceRequest.for_point(point, load_kernel(point.kernel_ref), state.target)
    try:
        out = tracing.trace(toolchain, kernel, state.fresh("platform-trace"), timeout_seconds=PROBE_TIMEOUT_SECONDS)
        neff = out.neff_path or state.compile_legacy(out.ir_path)
        folder = state.fresh("platform-capture")
        profiler.capture(
            toolchain, neff, state.input_files(folder), folder, num_exec=1, profile_nth_exec=None,
            visible_cores="0", lnc=point.lnc, timeout_seconds=PROBE_TIMEOUT_SECONDS,
        )  # fmt: skip
    except KernelsweepError as exc:
        if exc.error_class == REFUSED_AT_LOAD:
            return _mismatch(point, asked, exc.message)
    return None


def _mismatch(point: Point, asked: bool, refusal: str) -> str:
    platform = point.platform
    others = ", ".join(p for p in PLATFORM_NAMES if p != platform)
    command = f"doctor --smoke --platform {platform}" if asked else "doctor --smoke"
    assumed = "" if asked else f" (no instance type names this host's family, so the smoke assumed {platform})"
    said = re.sub(r"\S+\.neff\b", "the NEFF", refusal)  # the probe's own folder is gone by now
    return (
        f"{command}: this host's runtime will not load a NEFF built for {platform}{assumed}: {said}; "
        f"run the smoke with --platform set to this host's family ({others})"
    )
