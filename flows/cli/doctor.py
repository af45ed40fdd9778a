from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from kernelsweep.platforms import PLATFORM_NAMES


@click.command()
@click.option(
    "--smoke", is_flag=True, help="Run a bf16 matmul and MLP through trace, compile, capture and view, step by step."
)
@click.option(
    "--toolchain", "kind", type=click.Choice(["auto", "neuron", "cpu", "sim"]), default="auto", show_default=True,
    help="--smoke: which tools to run (auto: the real ones when present).",
)  # fmt: skip
@click.option(
    "--platform", type=click.Choice(PLATFORM_NAMES), help="--smoke: the points' platform (default: this host's)."
)
@click.option(
    "--report", type=click.Path(dir_okay=False, path_type=Path), help="--smoke: where to write the report file."
)
def doctor(smoke: bool, kind: str, platform: str | None, report: Path | None) -> None:
    """Show which Neuron tools, devices and packages this host has, and the fix for what is missing.

    Exit code 0 when the real toolchain is complete, 1 when sweeps here will run on the simulator.
    With --smoke: every step's commands, output and verdict, and a report file; exit 1 if a step failed.
    """
    if smoke:
        sys.exit(_smoke(kind, platform, report))
    from kernelsweep.doctor import report as diagnosis
    from kernelsweep.doctor.host_checks import Host
    from kernelsweep.flows.settings import neuron_python_from_env, tool_paths_from_env

    text, code = diagnosis(Host(extra_paths=tool_paths_from_env(), neuron_python=neuron_python_from_env()))
    click.echo(text)  # plain: the report may hold [brackets] that rich would take as markup
    sys.exit(code)


def _smoke(kind: str, platform: str | None, report: Path | None) -> int:
    from kernelsweep.doctor.host_checks import host_family, platform_mismatch
    from kernelsweep.doctor.risks import summary as risk_summary
    from kernelsweep.doctor.smoke import STEPS, run_smoke, smoke_point
    from kernelsweep.doctor.smoke_platform import refused_platform
    from kernelsweep.doctor.smoke_render import exit_code, header, render_step, summary, write_report
    from kernelsweep.errors import UsageError
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.this_host.context import neuron_python, resolve_toolchain

    if report is not None:
        _check_writable(report)
    locations = locations_from_env()
    python = neuron_python(None, locations) if kind != "sim" else None
    toolchain, notice = resolve_toolchain(kind, locations.sim_state_dir, locations.tool_paths, python)
    family, source = host_family(toolchain)
    mismatch = platform and platform_mismatch(platform, family, source)
    if mismatch:
        raise UsageError(mismatch)
    point = smoke_point(platform or family or "trn2")
    path = report or Path(f"kernelsweep-smoke-{point.platform}.txt")
    if report is None:
        _check_writable(path)
    if notice:
        click.echo(notice, err=True)
    steps = []
    with tempfile.TemporaryDirectory(prefix="kernelsweep-smoke-") as workdir:
        if family is None and (refused := refused_platform(toolchain, point, Path(workdir), bool(platform))):
            raise UsageError(refused)  # nothing names this host's family, and its runtime says it is not this one
        head = header(toolchain, point)
        click.echo(head + "\n")
        for index, step in enumerate(run_smoke(toolchain, point, Path(workdir)), 1):
            steps.append(step)
            click.echo(render_step(index, len(STEPS), step) + "\n")
    write_report(path, head, steps)
    click.echo(risk_summary(steps) + "\n")
    click.echo(summary(steps, path))
    return exit_code(steps)


def _check_writable(path: Path) -> None:
    """The report file can be written, found out before any step runs; nothing is left behind."""
    from kernelsweep.errors import UsageError

    if path.is_dir():
        raise UsageError(f"--report {path}: is a folder; give a file name")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise UsageError(f"--report {path}: cannot write it ({exc.strerror or exc}); give a writable path") from None
    if not existed:
        path.unlink()
