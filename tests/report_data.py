"""Results datasets made by real simulated sweeps for the report, compare and regression tests.

Each "night" runs the five stages in-process on the simulated toolchain (tests/stage_context's
recipe, with the simulator's settings passed through), builds the rows with `build_row` and stores
them with the results writer as one flow run dated that night: the same rows the sweep flow writes,
without Prefect's per-run start-up. The stand-in tools run in this process too
(tests/inprocess_tools.py): the same rows as through their processes, at a tenth of the CPU. Noise
is seeded (KERNELSWEEP_SIM_NOISE_SEED), so a dataset is the same every time it is built: `cached`
keeps a built one in pytest's cache, keyed by everything that could change it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import platform
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta
from importlib.metadata import version
from pathlib import Path

import pytest
from inprocess_tools import standins_in_process
from stage_context import point, sim_context

from kernelsweep.chain import run_stages
from kernelsweep.results.rows import PointRecord, build_row
from kernelsweep.results.writer import write_results
from kernelsweep.sweepspec.point import Point
from kernelsweep.this_host.context import StageContext

FIRST_NIGHT = date(2026, 3, 1)
NEW_COMPILER = "2.22.41000.0"  # what the simulated neuronx-cc reports when it plays the upgrade
SLOWED = point("vector_add", n=8192)  # the one point the new compiler makes 20% slower
POINTS = (SLOWED, point("vector_add", n=16384), point("mlp"))
SLOWDOWN = "vector_add/n=8192:1.2"
UPGRADE = {"KERNELSWEEP_SIM_COMPILER_VERSION": NEW_COMPILER, "KERNELSWEEP_SIM_COMPILER_SLOWDOWN": SLOWDOWN}
REPEATS = 7  # enough for one run against another to reach significance (docs/reports.md)
SAME_VERSION_NIGHTS = 21  # the baseline and 20 re-runs
ELSEWHERE = (point("mlp", platform="trn1"), point("mlp", platform="inf2"), point("crashes_on_device"))

TESTS = Path(__file__).resolve().parent
# What a dataset is made of: the core (the stages, the simulator and its tools, the row writer), this recipe,
# the stage context and the test kernels, on these libraries. flows/ and tasks/ are not involved.
SOURCES = (
    TESTS.parent / "kernelsweep",
    *(TESTS / name for name in ("report_data.py", "inprocess_tools.py", "stage_context.py", "kernels")),
)
LIBRARIES = ("numpy", "ml-dtypes", "pyarrow")
COMPLETE = "runs.json"  # written last: a folder without it is a build that did not finish


class Nights:
    """Runs one simulated sweep per night into `root/results`, sharing one artifact store and one
    simulated host, as a nightly deployment would."""

    def __init__(
        self, root: Path, *, repeats: int = REPEATS, seed: str = "report-tests", in_process: bool = True
    ) -> None:
        self.root, self.repeats, self.seed, self.in_process = root, repeats, seed, in_process
        self.results = str(root / "results")
        self.runs: list[str] = []

    @classmethod
    def compiler_upgrade(cls, root: Path) -> Nights:
        """21 nights on the default simulated compiler, then two on a newer one that makes vector_add 20%
        slower at n=8192; the last also runs mlp on trn1 and inf2 and a kernel that crashes on the device."""
        data = cls(root)
        for _ in range(SAME_VERSION_NIGHTS):
            data.run()
        data.run(env=UPGRADE)
        data.run(POINTS + ELSEWHERE, env=UPGRADE)
        return data

    def context(self, env: dict[str, str]) -> StageContext:
        return sim_context(
            self.root, cores=2, env={"KERNELSWEEP_SIM_NOISE_SEED": self.seed, **env}, repeats=self.repeats
        )

    def run(self, points: tuple[Point, ...] = POINTS, *, env: dict[str, str] | None = None) -> str:
        """One night's sweep; returns its flow run id."""
        ctx = self.context(env or {})
        night = FIRST_NIGHT + timedelta(days=len(self.runs))
        run_id = str(uuid.uuid4())
        if self.in_process:  # one stand-in at a time owns the process: the points one by one
            with standins_in_process():
                records = [chain(ctx, p) for p in points]
        else:
            with ThreadPoolExecutor(max_workers=2) as pool:
                records = list(pool.map(lambda p: chain(ctx, p), points))
        rows = [
            build_row(r, flow_run_id=run_id, toolchain="sim", is_simulation=True, versions=ctx.versions)
            for r in records
        ]
        write_results(rows, self.results, flow_run_id=run_id, run_date=night, lineage={"flow_run_id": run_id})
        self.runs.append(run_id)
        return run_id


def chain(ctx: StageContext, p: Point) -> PointRecord:
    """The sweep's chain, its stages called directly (nothing here stops it, so every point has a record)."""
    record = run_stages(ctx, p)
    assert record is not None
    return record


def sources_digest() -> str:
    """sha256 over every file a dataset is made of (path and bytes), plus the Python and library versions."""
    digest = hashlib.sha256()
    files = sorted(
        f for source in SOURCES for f in ([source] if source.is_file() else source.rglob("*"))
        if f.is_file() and "__pycache__" not in f.parts
    )  # fmt: skip
    for f in files:
        digest.update(f"{f.relative_to(TESTS.parent)}\0".encode() + f.read_bytes() + b"\0")
    digest.update(" ".join([platform.python_version(), *(f"{n}={version(n)}" for n in LIBRARIES)]).encode())
    return digest.hexdigest()


def cached(config: pytest.Config, name: str, build: Callable[[Path], Nights], fallback: Path) -> Nights:
    """`build(folder)`'s dataset, built once per content of its sources into pytest's cache (`.pytest_cache`)
    and read back from there afterwards; built in `fallback` when the cache is off (-p no:cacheprovider).
    The dataset is built in place: its rows name their artifacts by absolute path."""
    if getattr(config, "cache", None) is None:  # -p no:cacheprovider removes the attribute
        return build(fallback)
    root = config.cache.mkdir(f"{name}-{sources_digest()[:16]}")
    complete = root / COMPLETE
    with open(root.with_name(f"{root.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time: another process waits, then reads its build
        if complete.is_file():
            data = Nights(root)
            data.runs = json.loads(complete.read_text())
            return data
        for leftover in root.iterdir():  # an unfinished build
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        for older in root.parent.glob(f"{name}-*"):  # built from sources that have changed since
            if older.name.startswith(root.name):
                continue
            if older.is_dir():
                shutil.rmtree(older)
            else:
                older.unlink()
        data = build(root)
        assert data.root == root
        complete.write_text(json.dumps(data.runs))
        return data
