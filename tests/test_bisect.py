"""`kernelsweep bisect` (kernelsweep.bisect): one point, one ordered axis (SDK builds or kernel commits),
narrowed to the change that made it slower by the report's verdict rule, on the simulator's
histories with one culprit each and its run-level noise on. Each run is the point measured through
the sweep's stages and stored as a row; the bisect's journal lets a killed one resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsweep.errors import UsageError
from kernelsweep.sim.kernel_history import KERNEL_REF, SHAPE, write_history

BUILDS = "2.20.0,2.21.0,2.22.0,2.23.0"
CULPRIT = "2.22.0@vector_add:1.3"
POINT = ("vector_add", "--shape", "n=65536", "--toolchain", "sim", "--repeats", "1")


def _env(tmp_path: Path, **sim: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSWEEP_")}
    return env | {"KERNELSWEEP_STATE_DIR": str(tmp_path / "state"), "KERNELSWEEP_SIM_NOISE_SEED": "bisect"} | sim


def _bisect(tmp_path: Path, *args: str, **sim: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kernelsweep.flows.cli", "bisect", *args]
    return subprocess.run(command, cwd=tmp_path, env=_env(tmp_path, **sim), capture_output=True, text=True, timeout=600)


def _journal(tmp_path: Path) -> dict:
    [path] = (tmp_path / "results" / "_bisect").glob("*.json")
    return json.loads(path.read_text())


# Each measures dozens of runs through the simulated tools' processes (5-11 s apiece): the slow stage,
# which keeps the README's default stage under three minutes.
MEASURES = pytest.mark.slow


@MEASURES
def test_ends_that_do_not_differ_are_said_so_and_the_middle_is_never_measured(tmp_path):
    # no culprit: every build as fast; quieter runs than the default, so "same" is decided in two runs a side
    quiet = {f"KERNELSWEEP_SIM_{n}_NOISE": "0.002" for n in ("RUN", "SHARED", "HOST")}
    done = _bisect(tmp_path, *POINT, "--builds", BUILDS, **quiet)
    assert done.returncode == 1, done.stderr
    assert "the bad end is not slower than the good end (same:" in done.stdout and "step " not in done.stdout
    assert {run["at"] for run in _journal(tmp_path)["runs"]} == {0, 3}


@MEASURES
def test_bisecting_kernel_commits_names_the_culprit_commit_and_leaves_no_worktree(tmp_path):
    hashes = write_history(tmp_path / "repo", commits=4, culprit=2)
    done = _bisect(
        tmp_path, KERNEL_REF, "--shape", SHAPE, *POINT[3:], "--repo", "repo", "--good", hashes[0], "--bad", "main"
    )
    assert done.returncode == 0, done.stderr
    assert f"culprit: commit {hashes[2][:12]} (after commit {hashes[1][:12]})" in done.stdout
    assert "against the good end" in done.stdout
    worktrees = subprocess.run(
        ["git", "-C", str(tmp_path / "repo"), "worktree", "list"], capture_output=True, text=True
    )
    assert worktrees.stdout.count("\n") == 1


@MEASURES
def test_with_both_axes_the_corners_say_which_holds_the_culprit_and_only_that_one_is_bisected(tmp_path):
    hashes = write_history(tmp_path / "repo", commits=4, culprit=3)  # the range bisected ends before it
    quiet = {f"KERNELSWEEP_SIM_{n}_NOISE": "0.002" for n in ("RUN", "SHARED", "HOST")}  # "same" in two runs a side
    done = _bisect(
        tmp_path, KERNEL_REF, "--shape", SHAPE, *POINT[3:], "--builds", BUILDS, "--repo", "repo",
        "--good", hashes[0], "--bad", hashes[2], KERNELSWEEP_SIM_CULPRIT_BUILD="2.22.0@history_add:1.3", **quiet,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "builds: holds a culprit: +" in done.stdout and "commits: holds none: " in done.stdout, done.stdout
    assert "builds: culprit: build 2.22.0 (after build 2.21.0): +" in done.stdout
    assert "commits: the bad end is not slower than the good end (same:" in done.stdout
    at = {tuple(run["at"]) for run in _journal(tmp_path)["runs"]}
    assert all(b == 0 or c == 0 for b, c in at)  # along each axis from the good corner; never both moved
    assert {c for _, c in at} == {0, 2}  # the commits' middle never measured
    assert {(3, 0), (0, 2)} <= at and len({b for b, _ in at}) > 2  # both corners, then the builds' middle


@MEASURES
def test_a_killed_bisect_resumes_without_measuring_any_run_twice_and_names_the_culprit_build(tmp_path, monkeypatch):
    from kernelsweep.bisect.axis import builds_axis
    from kernelsweep.bisect.run import Question, bisect
    from kernelsweep.bisect.text import lines
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.report.stats import Rule

    for name, value in _env(tmp_path, KERNELSWEEP_SIM_CULPRIT_BUILD=CULPRIT).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    data = {"name": "bisect", "platforms": ["trn2"], "kernels": [{"kernel": "vector_add", "grid": {"n": [65536]}}],
            "capture": {"repeats": 1}, "toolchain": "sim", "artifacts": "artifacts", "results": "results"}  # fmt: skip
    question = Question(data, builds_axis(BUILDS.split(","), None, None), Rule(), max_runs=6)
    seen: list[int] = []

    def killed_after_five(at, sample):
        seen.append(at)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bisect(question, locations_from_env(), on_run=killed_after_five)
    assert len(_journal(tmp_path)["runs"]) == 5 and "outcome" not in _journal(tmp_path)

    outcome, journal, measured = bisect(question, locations_from_env())
    runs = _journal(tmp_path)["runs"]
    assert outcome.status == "found" and question.axis.labels[outcome.bad] == "2.22.0"
    used = sum(outcome.ends.runs) + sum(step.runs for step in outcome.steps)  # runs the decisions rest on
    assert len(runs) == used and measured == used - 5 > 0  # the five journaled runs replayed, none measured again
    from kernelsweep.report.load import Selection, load

    rows = load("results", Selection(sweeps=(f"bisect-{journal.id}",)))
    assert sorted(r.row_id for r in rows) == sorted(run["row_id"] for run in runs)  # a row per run, none twice
    assert {r.compiler_version.split("+")[0] for r in rows} == {run["label"] for run in runs}
    with pytest.raises(
        UsageError, match="no results under"
    ):  # a report leaves a bisection's runs out of the point's series
        load("results")
    shown = "\n".join(lines(outcome, question.axis))
    assert "culprit: build 2.22.0 (after build 2.21.0): +" in shown and "the bad end against build 2.22.0" in shown


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--builds", BUILDS, "--good", "2.19.0"), "--good '2.19.0' is not one of --builds"),
        (("--builds", BUILDS, "--good", "2.23.0", "--bad", "2.21.0"), "does not come before --bad"),
        (("--builds", "2.20.0,2.20.0"), "names a build twice"),
        (("--builds", BUILDS, "--toolchain", "auto"), "simulator only"),
        (("--repo", "repo", "--good", "no-such-commit", "--bad", "main"), "no such commit"),
        (("--repo", "repo", "--good", "main", "--bad", "main~2"), "is not an ancestor of --bad"),
        ((), "give one axis"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_with_nothing_measured(tmp_path, args, says):
    write_history(tmp_path / "repo", commits=3, culprit=1)
    point = ("vector_add", "--shape", "n=65536", *(() if "--toolchain" in args else ("--toolchain", "sim")))
    done = _bisect(tmp_path, *point, *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


def test_an_unknown_kernel_is_one_line_and_exit_2(tmp_path):
    done = _bisect(tmp_path, "no_such_module:kernel", "--shape", "n=1024", "--toolchain", "sim", "--builds", BUILDS)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "results" / "_bisect").exists()
