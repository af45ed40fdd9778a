"""`kernelsweep bisect`: which SDK build or kernel commit made one point slower (docs/bisect.md).
Both --builds and --repo: which axis holds the culprit first (each corner against the good one), then
each axis that does. Exit codes: 0 a culprit found, 1 none (the ends do not differ, or a step stayed
undecided within the budget), 2 bad input, 3 a step's point failed or the run could not be made."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kernelsweep.errors import UsageError
from kernelsweep.flows.cli.bench import shape_grid
from kernelsweep.flows.cli.output import EXIT_PROBLEMS
from kernelsweep.platforms import PLATFORM_NAMES
from kernelsweep.report import Rule
from kernelsweep.report.interleaved import FIRST_LOOK

if TYPE_CHECKING:
    from kernelsweep.bisect.axis import Axis


@click.command()
@click.argument("kernel", metavar="KERNEL")
@click.option("--shape", required=True, help="The point's parameters, e.g. n=65536 (kernel defaults fill the rest).")
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--platform", type=click.Choice(PLATFORM_NAMES), default="trn2", show_default=True)
@click.option("--builds", help="SDK builds in release order, comma-separated (on the simulator: compiler versions).")
@click.option("--sdk-folder", type=click.Path(path_type=Path),
              help="A folder of SDK venvs: bisect them as builds, in the order of the neuronx-cc each holds "
              "(--good/--bad: a version or its leading parts, e.g. 2.24).")  # fmt: skip
@click.option("--repo", type=click.Path(path_type=Path), help="The kernel's git repository: bisect its commits.")
@click.option("--good", help="The good end: a build of --builds (default the first), or a commit of --repo (with "
              "both axes: the commit; the builds are all of --builds).")  # fmt: skip
@click.option("--bad", help="The bad end: a build of --builds (default the last), or a commit of --repo.")
@click.option("--repeats", type=click.IntRange(1, 100), default=3, show_default=True, help="Profiled captures per run.")
@click.option("--max-runs", type=click.IntRange(2, 50), default=6, show_default=True,
              help="Budget: runs of one position before it counts as undecided.")  # fmt: skip
@click.option("--rounds", type=click.IntRange(0, 1000), default=0, show_default=True,
              help="Decide the ends and each midpoint on up to this many rounds captured in turn with the good "
              "end on one core (at least 3), instead of on runs (0).")  # fmt: skip
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=Rule().threshold,
              show_default=True, help="The change that matters, as a fraction.")  # fmt: skip
@click.option("--toolchain", type=click.Choice(["auto", "neuron", "cpu", "sim"]), default="auto", show_default=True)
@click.option("--artifacts", default="artifacts", show_default=True, help="Artifact store (and its caches).")
@click.option("--results", default="results", show_default=True,
              help="Where each run's row (sweep bisect-<id>) and the bisect's journal (_bisect/) go.")  # fmt: skip
def bisect(
    kernel: str,
    shape: str,
    dtype: str,
    platform: str,
    builds: str | None,
    sdk_folder: Path | None,
    repo: Path | None,
    good: str | None,
    bad: str | None,
    repeats: int,
    max_runs: int,
    rounds: int,
    threshold: float,
    toolchain: str,
    artifacts: str,
    results: str,
) -> None:
    """Find the one SDK build or kernel commit that made a point (KERNEL at --shape) slower."""
    from kernelsweep.bisect import Question, bisect_both, both_lines, commits_axis, lines
    from kernelsweep.bisect import bisect as run_bisect
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.stores import probe_location
    from kernelsweep.sweepspec import expand_spec, parse_spec

    if builds is None and sdk_folder is None and repo is None:
        raise UsageError(
            "give one axis or both: --builds V1,V2,... or --sdk-folder DIR (SDK builds), --repo PATH (kernel commits)"
        )
    if 0 < rounds < FIRST_LOOK:
        raise UsageError(f"--rounds {rounds}: fewer than {FIRST_LOOK} cannot bound a change; give 0 or {FIRST_LOOK}+")
    both = (builds is not None or sdk_folder is not None) and repo is not None  # --good/--bad: the commits then
    commits = commits_axis(repo.resolve(), good, bad) if repo is not None else None
    axis = _builds(builds, sdk_folder, toolchain, rounds, *((None, None) if both else (good, bad))) or commits
    assert axis is not None
    data = {
        "name": "bisect",
        "platforms": [platform],
        "kernels": [{"kernel": kernel, "grid": shape_grid(shape), "dtypes": [dtype]}],
        "capture": {"repeats": repeats},
        "toolchain": toolchain,
        "artifacts": artifacts,
        "results": results,
    }
    spec = parse_spec(data, source="bisect")
    probe_location(spec.artifacts_location, "artifact store", "--artifacts")
    probe_location(spec.results_location, "results", "--results")
    question = Question(data, axis, Rule(threshold=threshold), max_runs, commits if both else None, rounds)
    locations = locations_from_env()
    with (commits or axis).at(0):  # the point checked where its kernel exists: a commit's module only in its checkout
        expand_spec(spec, source="bisect")  # an unknown kernel or a shape it refuses: one line, nothing measured
    other = question.other
    if other is not None:
        two, journal, measured = bisect_both(question, locations)
        outcomes, shown = [two.first, two.second], both_lines(two.first, two.second, (axis, other))
    else:
        outcome, journal, measured = run_bisect(question, locations)
        outcomes, shown = [outcome], lines(outcome, axis)
    positions = len(axis.labels) + (len(other.labels) - 1 if other else 0)
    rounds_held = f"; {len(journal.doc.get('rounds', []))} interleaved rounds in it" if rounds else ""
    click.echo(
        f"bisect {journal.id}: {positions} positions; {measured} runs measured now; journal {journal.uri}{rounds_held}"
    )
    for line in shown:
        click.echo(line)
    sys.exit(0 if any(o.status == "found" for o in outcomes) else EXIT_PROBLEMS)


def _builds(
    builds: str | None, folder: Path | None, toolchain: str, rounds: int, good: str | None, bad: str | None
) -> Axis | None:
    """The builds axis: simulator compiler versions (--builds), or a folder's SDK environments."""
    from kernelsweep.bisect import builds_axis, sdk_environments, sdks_axis

    if builds is not None and folder is not None:
        raise UsageError("give --builds or --sdk-folder, not both: they are two ways to name the SDK builds")
    if builds is not None:
        if toolchain != "sim":
            raise UsageError("--builds runs on the simulator only (compiler versions); add --toolchain sim")
        return builds_axis(builds.split(","), good, bad)
    if folder is None:
        return None
    if toolchain == "sim":
        raise UsageError("--sdk-folder runs each SDK's own compiler: use --toolchain cpu (or neuron on a device)")
    if rounds:
        raise UsageError("--rounds with --sdk-folder is not built yet (rounds capture under one SDK); give --rounds 0")
    return sdks_axis(sdk_environments(folder.resolve()), good, bad, folder)
