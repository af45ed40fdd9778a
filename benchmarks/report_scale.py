"""`kernelsweep report` and `compare` on 10^4 to 10^6 rows in two shapes: rows, seconds and peak memory.

A dataset of N nights x S series (the first S of 2 kernels x 125 shapes x 2 dtypes x 2 platforms;
1,000 by default, 300 for the long-history shape: 1,000 nights x 300 series is 300,000 rows) is written
once through the real writer and schema (kernelsweep.results.writer.write_results: one object per
platform per night) and cached under --data. Each row has ten raw repeats drawn like the simulator
draws them (a 1% jitter per repeat, a 1% shift per run); a compiler upgrade two thirds of the way
through makes a tenth of the series 10% slower, and one point in a thousand fails. Nothing in the
figures comes from the data: they are the commands' own wall time and peak resident memory (the
child's ru_maxrss), each command run as a user runs it, in its own process.

    python benchmarks/report_scale.py [--data /tmp/kernelsweep-report-scale] [--nights 10 100 1000] [--series 1000]
    python benchmarks/report_scale.py --nights 1000 3334 --series 300   # the long-history shape
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np

from kernelsweep.results.rows import Row
from kernelsweep.results.writer import write_results

KERNELS = ("vector_add", "matmul")
SHAPES = tuple(f"n={128 * k}" for k in range(1, 126))
DTYPES = ("float32", "bfloat16")
PLATFORMS = ("trn1", "trn2")
REPEATS = 10
FIRST = date(2024, 1, 1)
OLD, NEW = "2.21.33363.0", "2.22.1000.0"


def _series(count: int) -> list[tuple[str, int, str, str, str]]:
    """The first `count` (kernel, shape index, shape, dtype, platform) series."""
    every = [(k, s, shape, d, p) for k in KERNELS for s, shape in enumerate(SHAPES) for d in DTYPES for p in PLATFORMS]
    if not 0 < count <= len(every):
        raise SystemExit(f"--series {count}: give 1 to {len(every)}")
    return every[:count]


def _night_rows(rng: np.random.Generator, night: int, nights: int, run_id: str, series: int) -> list[Row]:
    upgraded = night >= (2 * nights) // 3
    started = datetime.combine(FIRST + timedelta(days=night), datetime.min.time(), UTC) + timedelta(hours=1)
    rows = []
    for index, (kernel, s, shape, dtype, platform) in enumerate(_series(series), start=1):
        base = 10.0 + s * (2.0 if kernel == "matmul" else 0.5)
        slower = 1.10 if upgraded and index % 10 == 0 else 1.0
        values = base * slower * (1 + 0.01 * rng.standard_normal()) * (1 + 0.01 * rng.standard_normal(REPEATS))
        failed = rng.random() < 0.001
        rows.append(_row(kernel, shape, dtype, platform, run_id, started, values, failed, upgraded))
    return rows


def _row(kernel, shape, dtype, platform, run_id, started, values, failed, upgraded) -> Row:  # noqa: ANN001
    ok = not failed
    return Row(
        row_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run_id}/{kernel}/{shape}/{dtype}/{platform}")),
        sweep="nightly",
        kernel=kernel,
        kernel_ref=f"kernelsweep.kernels.{kernel}:{kernel}",
        shape=shape,
        params={"n": int(shape.split("=")[1])},
        dtype=dtype,
        platform=platform,
        lnc=1,
        seed=0,
        toolchain="sim",
        is_simulation=True,
        status="ok" if ok else "failed",
        error_stage=None if ok else "capture",
        error_class=None if ok else "CaptureError",
        error_message=None if ok else "NRT busy",
        metrics={"total_time_us": float(np.median(values))} if ok else {},
        repeats=REPEATS if ok else None,
        latency_median_us=float(np.median(values)) if ok else None,
        latency_min_us=float(values.min()) if ok else None,
        latency_max_us=float(values.max()) if ok else None,
        latency_p90_us=float(np.percentile(values, 90)) if ok else None,
        latency_p99_us=float(np.percentile(values, 99)) if ok else None,
        latencies_us=[float(v) for v in values] if ok else None,
        correct=True if ok else None,
        compiler_version=NEW if upgraded else OLD,
        runtime_version="2.28.0",
        profiler_version="2.31.0",
        nki_version="0.6.0",
        kernel_source_sha256="0" * 64,
        instance_type="trn2.48xlarge",
        flow_run_id=run_id,
        started_at=started,
        finished_at=started,
    )


def dataset(data: Path, nights: int, series: int = 1000) -> Path:
    """`<data>/<nights>-nights[-<series>-series]/results`, written once (a `.complete` marker last)."""
    folder = data / (f"{nights}-nights" if series == 1000 else f"{nights}-nights-{series}-series")
    results = folder / "results"
    if (folder / ".complete").exists():
        return results
    rng = np.random.default_rng(nights)
    started = time.perf_counter()
    for night in range(nights):
        run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"night-{nights}-{night}"))
        rows = _night_rows(rng, night, nights, run_id, series)
        write_results(rows, str(results), flow_run_id=run_id, run_date=FIRST + timedelta(days=night), lineage={})
    (folder / ".complete").write_text("")
    print(f"wrote {nights} nights to {results} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return results


def measure(argv: list[str]) -> tuple[float, float, int, float]:
    """(seconds, peak resident MiB, exit code, CPU seconds) of one CLI command in its own process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-m", "kernelsweep.flows.cli", *argv], stdout=out,
                                stderr=subprocess.PIPE)  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err}")
    return seconds, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "kernelsweep-report-scale")
    parser.add_argument("--nights", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--series", type=int, default=1000, help="series a night (1,000; 300: the long-history shape)")
    args = parser.parse_args()
    series = args.series
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"{'command':<40} {'rows':>9} {'seconds':>8} {'peak MiB':>9} {'exit':>4} {'load 1m':>7}")
    for nights in args.nights:
        results = str(dataset(args.data, nights, series))
        commands = {
            "report --format json": ["report", "--results", results, "--format", "json"],
            "compare --versions compiler": [
                "compare",
                "--results",
                results,
                "--versions",
                "compiler",
                OLD,
                NEW,
                "--format",
                "json",
            ],  # fmt: skip
            "compare --runs previous latest": [
                "compare",
                "--results",
                results,
                "--runs",
                "previous",
                "latest",
                "--format",
                "json",
            ],  # fmt: skip
        }
        for name, argv in commands.items():
            seconds, peak, code, _ = measure(argv)
            load = os.getloadavg()[0]  # the machine is shared: a figure means little without it
            print(f"{name:<40} {nights * series:>9,} {seconds:>8.1f} {peak:>9.0f} {code:>4} {load:>7.2f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
