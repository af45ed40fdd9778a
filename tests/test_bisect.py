"""`kernelsweep bisect` (kernelsweep.bisect): one point, one ordered axis (SDK builds or kernel commits),
narrowed to the change that made it slower by the report's verdict rule, on the simulator's
histories with one culprit each and its run-level noise on. Each run is the point measured through
the sweep's stages and stored as a row; the bisect's journal lets a killed one resume."""

from __future__ import annotations

import json
import math
import os
import random
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


@MEASURES
def test_steps_on_interleaved_rounds_capture_the_positions_neffs_on_one_core_and_resume_after_a_kill(
    tmp_path, monkeypatch
):
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
    question = Question(data, builds_axis(["2.20.0", "2.21.0", "2.22.0"], None, None), Rule(), 6, rounds=3)
    seen: list = []

    def killed_in_the_step(at, sample):
        seen.append(at)
        if at == (0, 1, 2):  # the midpoint's first round, after the ends' three
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bisect(question, locations_from_env(), on_run=killed_in_the_step)
    assert [len(r["at"]) for r in _journal(tmp_path)["rounds"]] == [2, 2, 2, 3]

    outcome, _, measured = bisect(question, locations_from_env())
    journal = _journal(tmp_path)
    assert outcome.status == "found" and question.axis.labels[outcome.bad] == "2.22.0"
    assert measured == 0 and len(journal["runs"]) == 3  # a run a position (its NEFF and row), none again
    assert [r["at"] for r in journal["rounds"]] == [[0, 2]] * 3 + [[0, 1, 2]] * 3  # the killed round kept
    good, middle, bad = zip(*(r["latencies_us"] for r in journal["rounds"][3:]), strict=True)
    assert all(b / g > 1.2 and abs(m / g - 1) < 0.05 for g, m, b in zip(good, middle, bad, strict=True))
    shown = "\n".join(lines(outcome, question.axis))
    assert "step build 2.21.0: good after 3 rounds" in shown and "over 3 interleaved rounds on one core" in shown


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
        (("--builds", BUILDS, "--rounds", "2"), "--rounds 2: fewer than 3 cannot bound a change"),
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


class _Device:
    """A stand-in device for the search alone (kernelsweep.bisect.search): position p runs 100 us, x1.1 from
    `culprit` on; each capture has 1% jitter; each run, and each batch of rounds, is a session with its own
    shift (`session`, a fraction); along a session every capture is `drift` slower than the one before."""

    def __init__(self, culprit: int, session: float = 0.0, drift: float = 0.0, seed: int = 0, order=None):
        from kernelsweep.bisect.search import capture_order

        self.culprit, self.session, self.drift = culprit, session, drift
        self.order = order or capture_order
        self.rng = random.Random(seed)
        self.rounds_captured: list[tuple] = []

    def _level(self, at: int) -> float:
        return 100.0 * (1.1 if at >= self.culprit else 1.0)

    def _jitter(self) -> float:
        return 1 + 0.01 * self.rng.gauss(0, 1)

    def measure(self, at: int):
        from kernelsweep.report.stats import Sample

        shift = 1 + self.session * self.rng.gauss(0, 1)
        return Sample.of([self._level(at) * shift * self._jitter() for _ in range(2)])

    def capture(self, key: tuple, start: int, count: int):
        shift, captured = 1 + self.session * self.rng.gauss(0, 1), 0
        for number in range(start, start + count):
            got = {}
            for i in self.order(number, len(key)):
                got[i] = self._level(key[i]) * shift * math.exp(self.drift * captured) * self._jitter()
                captured += 1
            self.rounds_captured.append(key)
            yield tuple(got[i] for i in range(len(key)))


def _search(device: _Device, count: int, rounds: int, runs=None):
    from kernelsweep.bisect.search import Bisection, Runs
    from kernelsweep.report.stats import Rule

    runs = runs or Runs(device.measure, capture=device.capture)
    return Bisection(count, runs, Rule(), "k", max_runs=6, max_rounds=rounds).run(), runs


def test_interleaved_rounds_cancel_a_run_level_shift_that_separate_runs_cannot_tell_from_the_culprit():
    # 6% run-to-run (six times the simulator's default): a run's shift is as large as the +10% culprit
    found = {"rounds": 0, "runs": 0}
    for seed in range(6):
        for mode, rounds in (("rounds", 12), ("runs", 0)):
            outcome, _ = _search(_Device(culprit=5, session=0.06, seed=seed), count=8, rounds=rounds)
            found[mode] += outcome.status == "found" and outcome.bad == 5
    assert found["rounds"] == 6 and found["runs"] <= 1, found


def test_a_drift_along_the_session_cancels_over_rounds_captured_forward_then_reversed():
    # each capture 6% slower than the one before: in a fixed order the drift alone makes every pair "slower"
    right = {"alternating": 0, "forward": 0}
    for seed in range(5):
        for name, order in (("alternating", None), ("forward", lambda number, size: list(range(size)))):
            outcome, _ = _search(_Device(culprit=3, drift=0.06, seed=seed, order=order), count=8, rounds=12)
            right[name] += outcome.status == "found" and outcome.bad == 3
    assert right["alternating"] == 5 and right["forward"] <= 1, right


def test_interleaved_ends_that_do_not_differ_stop_without_capturing_a_midpoint():
    device = _Device(culprit=99, seed=1)
    outcome, runs = _search(device, count=8, rounds=12)
    assert outcome.status == "same" and not outcome.steps
    assert set(device.rounds_captured) == {(0, 7)} and set(runs.by_position) == {0, 7}


def test_an_interrupted_interleaved_bisection_resumes_from_its_rounds_without_capturing_one_twice():
    from kernelsweep.bisect.search import Runs

    whole, _ = _search(_Device(culprit=4, seed=3), count=8, rounds=12)
    device = _Device(culprit=4, seed=3)
    kept = Runs(device.measure, capture=device.capture)
    stopped_after = 7

    def dies(key, start, count):
        for done in device.capture(key, start, count):
            if len(device.rounds_captured) > stopped_after:
                raise KeyboardInterrupt
            yield done

    kept._capture = dies
    with pytest.raises(KeyboardInterrupt):
        _search(device, count=8, rounds=12, runs=kept)
    journaled = sum(len(done) for done in kept.by_rounds.values())
    assert journaled == stopped_after
    resumed_device = _Device(culprit=4, seed=3)
    resumed_device.rng.seed(99)  # another session: rounds already held must not be captured again
    again = Runs(
        resumed_device.measure, kept.by_position, capture=resumed_device.capture, journaled_rounds=kept.by_rounds
    )
    outcome, runs = _search(resumed_device, count=8, rounds=12, runs=again)
    assert outcome.status == whole.status == "found" and outcome.bad == whole.bad == 4
    assert runs.captured == sum(len(done) for done in runs.by_rounds.values()) - journaled > 0
