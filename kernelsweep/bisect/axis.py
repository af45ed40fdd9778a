"""The ordered axes a bisection walks, each position a way to measure the same point:

* SDK builds: versions in release order. On the simulator each is the compiler version the stand-in
  tools run as (KERNELSWEEP_SIM_COMPILER_VERSION), so a build's NEFFs are its own in the compile cache.
  A build travels as those tools' variables (`build_env`): the version, and the knobs that say how the
  simulated builds behave (which one is the culprit), so a compile host builds the NEFF this host would.
* SDK environments: the venvs of a folder, each an SDK build, in the order of the compiler each one
  holds (kernelsweep.bisect.sdk_folder). A position is that venv's python as the point's
  `neuron_python`: the trace worker traces and compiles under it, and its rows report its compiler.
* Kernel commits: a git range, good end first along the first-parent path to the bad end. Each
  position is that commit checked out in its own worktree, put first on the import path for the step
  (the trace worker and the stand-in tools inherit the path), its modules forgotten after the step.

A bad end, an unknown build or commit, or ends in the wrong order is a UsageError naming the fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import UsageError

COMPILER_VERSION_ENV = "KERNELSWEEP_SIM_COMPILER_VERSION"
# What the simulated compiler emits, by build: part of a build wherever it compiles (docs/simulator.md)
BUILD_BEHAVIOUR_ENV = ("KERNELSWEEP_SIM_CULPRIT_BUILD", "KERNELSWEEP_SIM_COMPILER_SLOWDOWN")
Matcher = Callable[[str, str], bool]  # (a position's label, an end as given): is it that end


@dataclass(frozen=True)
class Axis:
    kind: str  # "builds", "sdks" or "commits"
    labels: tuple[str, ...]  # the positions, good end first
    repo: Path | None = None
    pythons: tuple[str, ...] = ()  # "sdks": each position's SDK interpreter

    def describe(self, at: int) -> str:
        if self.kind == "commits":
            return f"commit {self.labels[at][:12]}"
        venv = f" ({Path(self.pythons[at]).parent.parent.name})" if self.pythons else ""
        return f"build {self.labels[at]}{venv}"

    def spec_of(self, position: int) -> dict[str, str]:
        """What this position sets in the point's spec: an SDK environment's interpreter, else nothing."""
        return {"neuron_python": self.pythons[position]} if self.kind == "sdks" else {}

    def build_env(self, position: int) -> dict[str, str] | None:
        """The position as variables of the toolchain's tools, for a compile host to compile its NEFF
        (the compile farm); None where a compile host cannot: a commit's checkout and an SDK environment's
        venv are on this host only."""
        if self.kind != "builds":
            return None
        behaviour = {name: os.environ[name] for name in BUILD_BEHAVIOUR_ENV if os.environ.get(name)}
        return {**behaviour, COMPILER_VERSION_ENV: self.labels[position]}

    @contextmanager
    def at(self, position: int) -> Iterator[None]:
        """This position in effect for the step measured inside."""
        if self.kind == "builds":
            with _env(COMPILER_VERSION_ENV, self.labels[position]):
                yield
        elif self.kind == "commits":
            assert self.repo is not None
            with _checkout(self.repo, self.labels[position]):
                yield
        else:  # an SDK environment is the spec's (spec_of), nothing of this process
            yield


def builds_axis(builds: Sequence[str], good: str | None, bad: str | None) -> Axis:
    """`builds` in release order; the range from `good` (default: the first) to `bad` (the last)."""
    builds = [b.strip() for b in builds if b.strip()]
    if len(set(builds)) != len(builds):
        raise UsageError("--builds names a build twice; give each SDK build once, in release order")
    first, last = _range(builds, good, bad, "--builds", lambda b, end: b == end)
    return Axis("builds", tuple(builds[first : last + 1]))


def sdks_axis(sdks: Sequence[tuple[str, str]], good: str | None, bad: str | None, folder: Path) -> Axis:
    """SDK environments as (compiler version, python) in release order; `good` and `bad` a version or its
    leading parts (2.24 for 2.24.5133.0+58f8de22), the first and the last by default."""
    versions = [version for version, _ in sdks]
    first, last = _range(versions, good, bad, f"the SDKs in {folder}", _version_matches)
    chosen = sdks[first : last + 1]
    return Axis("sdks", tuple(v for v, _ in chosen), pythons=tuple(p for _, p in chosen))


def _version_matches(version: str, end: str) -> bool:
    return version == end or version.startswith((end + ".", end + "+"))


def _range(labels: Sequence[str], good: str | None, bad: str | None, where: str, matches: Matcher) -> tuple[int, int]:
    """The indices of the good end (default: the first) and the bad one (the last), the good one first."""
    at = []
    for end, name, default in ((good, "--good", 0), (bad, "--bad", len(labels) - 1)):
        hits = [i for i, label in enumerate(labels) if matches(label, end)] if end else [default] if labels else []
        if len(hits) != 1:
            raise UsageError(f"{name} {end!r} is not one of {where} ({', '.join(labels)}); give one of them")
        at.append(hits[0])
    if at[1] - at[0] < 1:
        first, last = labels[at[0]], labels[at[1]]
        raise UsageError(f"--good {first} does not come before --bad {last} in {where}; list builds in release order")
    return at[0], at[1]


def commits_axis(repo: Path, good: str | None, bad: str | None) -> Axis:
    """The commits from `good` to `bad` (first-parent ancestry path), oldest first."""
    if not good or not bad:
        raise UsageError("--repo needs --good and --bad: the commits on each side, e.g. --good v1.2 --bad main")
    if not (repo / ".git").exists() and _git(repo, "rev-parse", "--git-dir") is None:
        raise UsageError(f"--repo {repo}: not a git repository; give the folder of the kernel's repository")
    ends = []
    for end, name in ((good, "--good"), (bad, "--bad")):
        sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{end}^{{commit}}")
        if sha is None:
            raise UsageError(f"{name} {end!r}: no such commit in {repo}; give a commit, branch or tag that exists")
        ends.append(sha)
    if ends[0] == ends[1] or _git(repo, "merge-base", "--is-ancestor", *ends) is None:
        raise UsageError(f"--good {good} is not an ancestor of --bad {bad}; give the older (good) commit as --good")
    path = _git(repo, "rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{ends[0]}..{ends[1]}")
    return Axis("commits", (ends[0], *(path or "").split()), repo)


def _git(repo: Path, *args: str) -> str | None:
    """git's output, or None when it fails (no such commit, not an ancestor)."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextmanager
def _checkout(repo: Path, sha: str) -> Iterator[None]:
    """The commit in a worktree of its own, first on the import path, its modules forgotten after."""
    parent = Path(tempfile.mkdtemp(prefix="kernelsweep-bisect-"))
    folder = parent / sha[:12]
    if _git(repo, "worktree", "add", "--detach", "--quiet", str(folder), sha) is None:
        shutil.rmtree(parent, ignore_errors=True)
        raise UsageError(f"cannot check out {sha[:12]} of {repo} into a worktree; run `git worktree prune` there")
    sys.path.insert(0, str(folder))
    try:
        _forget(folder)
        yield
    finally:
        sys.path.remove(str(folder))
        _forget(folder)
        _git(repo, "worktree", "remove", "--force", str(folder))
        shutil.rmtree(parent, ignore_errors=True)


def _forget(folder: Path) -> None:
    """Drop modules loaded from a checkout (or shadowed by it), so the next commit's are imported."""
    names = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    for name in list(sys.modules):
        if name.split(".")[0] in names:
            del sys.modules[name]
