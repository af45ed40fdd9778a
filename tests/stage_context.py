"""A StageContext on the simulated toolchain with no Prefect and no environment: what the stage,
row and throughput tests run the five stages in, in-process."""

from __future__ import annotations

from pathlib import Path

from kernelsweep.locks import CoreLeaser
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.stores.artifacts import LocalArtifactStore
from kernelsweep.sweepspec.models import CaptureSettings
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext
from kernelsweep.toolchain.versions import collect


def sim_context(root: Path, *, cores: int = 2, env: dict[str, str] | None = None, **capture: object) -> StageContext:
    """`cores` logical cores at LNC=2 (a trn2 device's own config): twice as many at LNC=1."""
    toolchain = sim_toolchain(root / "sim", env={"KERNELSWEEP_SIM_CORES": str(cores), **(env or {})})
    probe_dir = root / "probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    return StageContext(
        toolchain=toolchain,
        store=LocalArtifactStore(root / "artifacts"),
        capture=CaptureSettings.model_validate({"num_exec": 2, **capture}),
        leasers={lnc: CoreLeaser(root / "leases", list(range(2 * cores // lnc)), lnc=lnc) for lnc in (1, 2)},
        compile_slots=2,
        versions=collect(toolchain, probe_dir),
    )


def point(kernel: str = "vector_add", platform: str = "trn2", dtype: str = "float32", **params: int) -> Point:
    refs = {
        "vector_add": ("kernelsweep.kernels.vector_add:vector_add", {"n": 2048, "partition_size": 128, "free_size": 1}),
        "mlp": ("kernelsweep.kernels.mlp:mlp", {"b": 1, "s": 128, "h": 256, "i": 128}),
        "crashes_on_device": ("kernels.faulty:crashes_on_device", {"n": 1024, "partition_size": 128, "free_size": 1}),
        "legacy": ("kernels.legacy:legacy_vector_add", {"n": 2048, "partition_size": 128, "free_size": 1}),
    }
    ref, defaults = refs[kernel]
    return Point(
        sweep="stages",
        kernel=kernel,
        kernel_ref=ref,
        params={**defaults, **params},
        dtype=dtype,
        platform=platform,
        lnc=2 if platform == "trn2" else 1,
        seed=3,
    )
