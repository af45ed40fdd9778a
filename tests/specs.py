"""A sweep spec on the simulated toolchain with everything under one test's folder."""

from __future__ import annotations

from pathlib import Path

from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.models import SweepSpec

VECTOR_ADD = {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"], "grid": {"n": [2048]}}


def sim_spec(
    tmp_path: Path, kernels: list[dict], *, name: str = "test", platforms: tuple[str, ...] = ("trn2",), **settings
) -> SweepSpec:
    """Results and artifacts in `tmp_path`; two executions per capture unless `capture` says otherwise."""
    return parse_spec(
        {
            "name": name,
            "platforms": list(platforms),
            "toolchain": "sim",
            "results": str(tmp_path / "results"),
            "artifacts": str(tmp_path / "artifacts"),
            "capture": {"num_exec": 2},
            "kernels": kernels,
            **settings,
        }
    )
