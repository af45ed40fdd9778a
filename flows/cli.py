"""`kernelsweep`: validate, run and extract from the command line.

Exit codes: 0 every point ok; 1 some points failed (results still written); 2 usage or spec error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.spec import SweepSpec, expand, load_spec, parse_spec

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 160)

# Embedded runs use Prefect's ephemeral server: keep its telemetry off and its logs out of the
# user's terminal unless asked for (set the variables yourself to override).
QUIET_PREFECT = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_SERVER_LEVEL": "CRITICAL",
    "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
}


def _fail_usage(error: KernelsweepError) -> None:
    console.print(f"[red]error:[/red] {error.message}", highlight=False, soft_wrap=True)
    sys.exit(2)


def _load(spec_path: str, **overrides: str | None) -> tuple[SweepSpec, list]:
    try:
        spec = load_spec(spec_path)
        updates = {k: v for k, v in overrides.items() if v is not None}
        if updates:  # validated like the file itself, so a bad override is one clear line too
            spec = parse_spec({**spec.model_dump(), **updates}, source=f"{spec_path} (with command-line overrides)")
        return spec, expand(spec, source=spec_path)
    except UsageError as exc:
        _fail_usage(exc)


@click.group()
def main() -> None:
    """Sweep NKI kernels over shapes and platforms; results to Parquet."""
    if os.getcwd() not in sys.path:  # specs name kernel definitions in the user's own modules
        sys.path.insert(0, os.getcwd())


@main.command()
@click.argument("spec_path", metavar="SPEC")
def validate(spec_path: str) -> None:
    """Check a sweep spec and list its points."""
    spec, points = _load(spec_path)
    table = Table(title=f"{spec.name}: {len(points)} points")
    for column in ("point id", "kernel", "shape", "dtype", "platform", "lnc"):
        table.add_column(column)
    for p in points:
        table.add_row(p.point_id, p.kernel, p.shape, p.dtype, p.platform, str(p.lnc))
    out.print(table)


@main.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--toolchain", type=click.Choice(["auto", "neuron", "sim"]), help="Override the spec's toolchain.")
@click.option("--results", help="Results folder or s3://bucket/prefix (overrides the spec).")
@click.option("--artifacts", help="Artifact store folder or s3://bucket/prefix (overrides the spec).")
def run(spec_path: str, toolchain: str | None, results: str | None, artifacts: str | None) -> None:
    """Run a sweep on this host and print a summary table."""
    spec, points = _load(spec_path, toolchain=toolchain, results=results, artifacts=artifacts)
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    from flows.embedded import run_sweep, toolchain_notice  # imports Prefect: after the environment is set

    try:
        notice = toolchain_notice(spec)
    except UsageError as exc:
        _fail_usage(exc)
    if notice:
        console.print(notice, highlight=False, soft_wrap=True)
    try:
        with _ProgressBar(len(points)) as advance:
            report = run_sweep(spec, on_row=advance)
    except UsageError as exc:
        _fail_usage(exc)
    rows = report["rows"]
    out.print(summary_table(rows))
    for path in report["paths"]:
        out.print(f"results: {path}", highlight=False, soft_wrap=True)
    failed = sum(r["status"] != "ok" for r in rows)
    if failed:
        console.print(f"{failed} of {len(rows)} points failed (see error_message in the results)", highlight=False)
    sys.exit(1 if failed else 0)


class _ProgressBar:
    def __init__(self, total: int) -> None:
        self.progress = Progress(
            TextColumn("[bold]sweep"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
        )
        self.total = total

    def __enter__(self):
        self.progress.start()
        task = self.progress.add_task("starting", total=self.total)

        def advance(row: dict) -> None:
            self.progress.update(
                task, advance=1, description=f"{row['kernel']} {row['shape']} {row['platform']}: {row['status']}"
            )

        return advance

    def __exit__(self, *exc) -> None:
        self.progress.stop()


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def summary_table(rows: list[dict]) -> Table:
    table = Table(title="kernelsweep results" + (" (simulated)" if rows and rows[0]["is_simulation"] else ""))
    for column in ("kernel", "shape", "dtype", "platform", "status", "us", "TFLOPS", "MFU %", "% roofline", "correct"):
        table.add_column(column, justify="right" if column in ("us", "TFLOPS", "MFU %", "% roofline") else "left")
    for r in sorted(rows, key=lambda r: (r["kernel"], r["platform"], r["shape"])):
        status = r["status"] if r["status"] == "ok" else f"[red]{r['status']}: {r.get('error_class')}[/red]"
        correct = {True: "yes", False: "[red]NO[/red]", None: "-"}[r.get("correct")]
        table.add_row(
            r["kernel"],
            r["shape"],
            r["dtype"],
            r["platform"],
            status,
            _fmt(r.get("total_time_us"), ".2f"),
            _fmt(r.get("achieved_tflops"), ".2f"),
            _fmt(r.get("mfu_percent"), ".1f"),
            _fmt(r.get("roofline_percent"), ".1f"),
            correct,
        )
    return table


@main.command()
@click.argument("row_id", metavar="ROW_ID")
@click.option("--results", required=True, help="Results folder or s3://bucket/prefix holding the row.")
@click.option(
    "--dest",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the fetched artifacts [./lineage-ROW_ID].",
)
def lineage(row_id: str, results: str, dest: Path | None) -> None:
    """Fetch every artifact a result row links and verify each one's sha256.

    Exit code 0 when all verify, 1 when any is missing or corrupt, 2 when there is no such row.
    """
    from kernelsweep.lineage import render, verify_row

    try:
        report = verify_row(results, row_id, dest or Path(f"lineage-{row_id}"))
    except UsageError as exc:
        _fail_usage(exc)
    except KernelsweepError as exc:  # the results could not be read at all (S3 denied, unreachable, ...)
        console.print(f"[red]error:[/red] {exc.message}", highlight=False, soft_wrap=True)
        sys.exit(1)
    click.echo(render(report))  # plain: artifact names hold [brackets] that rich would take as markup
    sys.exit(0 if report.ok else 1)


@main.command()
def doctor() -> None:
    """Show which Neuron tools, devices and packages this host has, and the fix for what is missing.

    Exit code 0 when the real toolchain is complete, 1 when sweeps here will run on the simulator.
    """
    from flows.settings import tool_paths_from_env
    from kernelsweep.doctor import Host, main_text

    text, code = main_text(Host(extra_paths=tool_paths_from_env()))
    click.echo(text)  # plain: the report may hold [brackets] that rich would take as markup
    sys.exit(code)


@main.command()
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "--format", "profile_format", type=click.Choice(["json", "summary-json", "parquet"]), help="Default: detected."
)
def extract(profile: Path, profile_format: str | None) -> None:
    """Print the normalised metrics of a profile file as JSON."""
    from kernelsweep.metrics import read_profile

    try:
        metrics = read_profile(profile, profile_format)
    except KernelsweepError as exc:
        _fail_usage(exc)
    out.print_json(json.dumps(metrics.as_dict()))


if __name__ == "__main__":
    main()
