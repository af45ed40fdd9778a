"""`kernelsweep bench`: one point through the same stages and caches as a sweep, with no flow run,
printed as one JSON object (kernelsweep.bench). Exit codes as `run`: 0 the point is ok, 1 it failed
or computed a wrong output (the object says which and why), 2 bad input, 3 the run could not be made."""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import click

from kernelsweep.errors import UsageError
from kernelsweep.flows.cli.output import EXIT_PROBLEMS, console
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.report import strict_json


@click.command()
@click.argument("kernel", metavar="KERNEL")
@click.option(
    "--shape", required=True, help="The point's parameters, e.g. M=256,K=512,N=512 (kernel defaults fill the rest)."
)
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--platform", type=click.Choice(PLATFORM_NAMES), default="trn2", show_default=True)
@click.option("--iterations", type=click.IntRange(0, 100_000), default=0, show_default=True,
              help="Also time this many executions in one process of the runtime's benchmark tool.")  # fmt: skip
@click.option("--repeats", type=click.IntRange(1, 100), default=1, show_default=True, help="Profiled captures.")
@click.option("--hotspots", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="Attribute instruction time to source lines (debug-info compile; capture.hotspots).")  # fmt: skip
@click.option("--toolchain", type=click.Choice(["auto", "neuron", "cpu", "sim"]), default="auto", show_default=True)
@click.option(
    "--artifacts", default="artifacts", show_default=True, help="Artifact store (and its caches): a folder or s3://."
)
@click.option("--results", help="Also store the row (a one-point run) here, for `compare` and `report`.")
@click.option("--json", "compact", is_flag=True, help="The object on one line (default: indented).")
def bench(
    kernel: str,
    shape: str,
    dtype: str,
    platform: str,
    iterations: int,
    repeats: int,
    hotspots: str,
    toolchain: str,
    artifacts: str,
    results: str | None,
    compact: bool,
) -> None:
    """Measure one point (KERNEL: a built-in name or module:attribute) and print it as JSON."""
    from kernelsweep.sweepspec import expand_spec, parse_spec

    data = {
        "name": "bench",
        "platforms": [platform],
        "kernels": [{"kernel": kernel, "grid": shape_grid(shape), "dtypes": [dtype]}],
        "capture": {"repeats": repeats, "iterations": iterations, "hotspots": hotspots},
        "toolchain": toolchain,
        "artifacts": artifacts,
        **({"results": results} if results else {}),
    }
    spec = parse_spec(data, source="bench")
    [point] = expand_spec(spec, source="bench").points
    found, row_status = _measured(spec, point, results)
    print(strict_json.dumps(found, separators=(",", ":")) if compact else strict_json.dumps(found, indent=1))
    sys.exit(0 if row_status == "ok" else EXIT_PROBLEMS)


def shape_grid(shape: str) -> dict[str, list[int]]:
    """`M=256,K=512` as a one-value grid; one line naming the fix otherwise."""
    grid: dict[str, list[int]] = {}
    for term in filter(None, (t.strip() for t in shape.split(","))):
        axis, sep, value = term.partition("=")
        if not sep or not axis.strip() or not value.strip().lstrip("-").isdigit():
            raise UsageError(f"--shape {shape!r}: {term!r} is not AXIS=INTEGER; give e.g. M=256,K=512,N=512")
        if axis.strip() in grid:  # a point has one value per axis: measuring the last would be a guess
            raise UsageError(f"--shape {shape!r}: {axis.strip()} is given twice; give each axis once")
        grid[axis.strip()] = [int(value)]
    if not grid:
        raise UsageError("--shape is empty; give the point's parameters, e.g. M=256,K=512,N=512")
    return grid


def _measured(spec: Any, point: Any, results: str | None) -> tuple[dict[str, Any], str]:
    """Measure the point as a sweep would (kernelsweep.bench.measure), print its notices, store its row."""
    from kernelsweep.bench import as_json, measure
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.stores import probe_location

    probe_location(spec.artifacts_location, "artifact store", "--artifacts")
    if results:
        probe_location(spec.results_location, "results", "--results")
    run_id = f"bench-{uuid.uuid4()}"
    row, tool_seconds, notice = measure(spec, point, locations_from_env(), run_id)
    if notice:
        console.print(notice, highlight=False, soft_wrap=True)
    found = as_json(row, tool_seconds)
    if results:
        from kernelsweep.results import write_results

        lineage = {"sweep": "bench", "flow_run_id": run_id, "toolchain": row.toolchain, "points": 1}
        found["results"] = write_results(
            [row], spec.results_location, flow_run_id=run_id, run_date=datetime.now(UTC).date(), lineage=lineage
        )
    return found, row.status
