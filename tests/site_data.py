"""A small results dataset for the site's fast tests, written through the real writer and schema:
`nights` nights of two kernels (three series), raw repeats drawn with a 1% jitter, artifact URIs in
each row's lineage, and from `step_night` on a new compiler that makes vector_add n=8192 20% slower."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np

from kernelsweep.results.rows import Row
from kernelsweep.results.writer import write_results

FIRST = date(2026, 3, 1)
SERIES = (("vector_add", "n=8192", 10.0), ("vector_add", "n=16384", 20.0), ("mlp", "n=128", 50.0))
SLOWED = ("vector_add", "n=8192")
OLD, NEW = "2.21.33363.0", "2.22.41000.0"


def night(
    results: str, n: int, step_night: int, seed: int = 0, kernels: tuple[str, ...] = ("vector_add", "mlp")
) -> str:
    """Writes night `n` (one flow run) of `kernels` and returns its run id."""
    rng = np.random.default_rng(seed * 1000 + n)
    run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"site-night-{seed}-{n}"))
    started = datetime.combine(FIRST + timedelta(days=n), datetime.min.time(), UTC) + timedelta(
        hours=2, microseconds=123_457
    )
    upgraded = n >= step_night
    rows = []
    for kernel, shape, base in (s for s in SERIES if s[0] in kernels):
        factor = 1.2 if upgraded and (kernel, shape) == SLOWED else 1.0
        values = base * factor * (1 + 0.002 * rng.standard_normal()) * (1 + 0.01 * rng.standard_normal(9))
        row_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run}/{kernel}/{shape}"))
        rows.append(
            Row(
                row_id=row_id,
                sweep="nightly",
                kernel=kernel,
                kernel_ref=f"k:{kernel}",
                shape=shape,
                params={"n": int(shape.split("=")[1])},
                dtype="float32",
                platform="trn2",
                lnc=1,
                seed=0,
                toolchain="sim",
                is_simulation=True,
                status="ok",
                metrics={"total_time_us": float(np.median(values))},
                repeats=len(values),
                latency_median_us=float(np.median(values)),
                latency_min_us=float(values.min()),
                latency_max_us=float(values.max()),
                latencies_us=[float(v) for v in values],
                correct=True,
                compiler_version=NEW if upgraded else OLD,
                runtime_version="2.28.0",
                profiler_version="2.31.0",
                nki_version="0.6.0",
                kernel_source_sha256="0" * 64,
                instance_type="trn2.48xlarge",
                kernel_source_uri=f"s3://artifacts/source/{kernel}.py",
                neff_uri=f"s3://artifacts/neff/{row_id}.neff",
                profile_uri=f"s3://artifacts/profile/{row_id}.json",
                flow_run_id=run,
                started_at=started,
                finished_at=started,
            )  # fmt: skip
        )
    write_results(rows, results, flow_run_id=run, run_date=FIRST + timedelta(days=n), lineage={})
    return run


def nights(root: Path, count: int = 12, step_night: int = 8, seed: int = 0) -> str:
    results = str(root / "results")
    for n in range(count):
        night(results, n, step_night, seed)
    return results
