"""`kernelsweep bisect --sdk-folder`: a folder of SDK venvs as the builds axis, each venv a stand-in SDK
(tests/test_toolchain_versions.py's) whose neuronx-cc reports its own version, in the order of those
versions whatever the folders are called; the simulator's culprit build is one of them, and each run
traces and compiles under its venv's python (`--toolchain cpu`: the simulator captures the model built
as that compiler). The stand-in tools run in this process (tests/inprocess_tools.py) to keep it cheap;
the trace workers are the venvs' own processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from inprocess_tools import standins_in_process
from test_toolchain_versions import _sdk_venv

from kernelsweep.errors import UsageError

OLD, MID, NEW = "2.24.5133.0+58f8de22", "2.25.100.0+standin", "2.26.1.0+standin"


def _folder(root: Path, *named: tuple[str, str]) -> Path:
    """Stand-in SDK venvs named as given (never in version order below), and a folder that is no venv."""
    root.mkdir()
    for name, version in named:
        _sdk_venv(root, version).parent.parent.rename(root / name)
    (root / "notes").mkdir()
    return root


def test_the_folders_venvs_are_bisected_in_their_compilers_order_and_the_culprit_build_is_named(tmp_path, monkeypatch):
    from kernelsweep.bisect import Question, bisect, lines, sdk_environments, sdks_axis
    from kernelsweep.flows.settings import locations_from_env
    from kernelsweep.report.load import Selection, load
    from kernelsweep.report.stats import Rule

    sdks = _folder(tmp_path / "sdks", ("c-first", OLD), ("a-latest", NEW), ("b", MID))
    axis = sdks_axis(sdk_environments(sdks), None, None, sdks)
    venvs = [Path(p).parent.parent.name for p in axis.pythons]
    assert axis.labels == (OLD, MID, NEW) and venvs == ["c-first", "b", "a-latest"]  # by compiler, not by name
    monkeypatch.setenv("STANDIN_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("KERNELSWEEP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("KERNELSWEEP_SIM_CULPRIT_BUILD", "2.25@vector_add:1.3")
    monkeypatch.chdir(tmp_path)
    data = {"name": "bisect", "platforms": ["trn2"], "kernels": [{"kernel": "vector_add", "grid": {"n": [65536]}}],
            "capture": {"repeats": 1}, "toolchain": "cpu", "artifacts": "artifacts", "results": "results"}  # fmt: skip
    with standins_in_process():
        outcome, journal, _ = bisect(Question(data, axis, Rule(), max_runs=4), locations_from_env())
    assert outcome.status == "found" and axis.labels[outcome.bad] == MID, lines(outcome, axis)
    rows = load("results", Selection(sweeps=(f"bisect-{journal.id}",)))
    # each run's row reports the compiler of the venv it ran under, and the culprit's times are its own
    by_label = {run["row_id"]: run["label"] for run in journal.doc["runs"]}
    assert {r.row_id: r.compiler_version for r in rows} == by_label and set(by_label.values()) == {OLD, MID, NEW}
    assert "culprit: build 2.25.100.0+standin (b) (after build 2.24.5133.0+58f8de22 (c-first)): +" in "\n".join(
        lines(outcome, axis)
    )


def test_good_and_bad_name_a_version_by_its_leading_parts(tmp_path):
    from kernelsweep.bisect import sdks_axis

    sdks = [(OLD, "/o/bin/python"), (MID, "/m/bin/python"), (NEW, "/n/bin/python")]
    assert sdks_axis(sdks, "2.25", None, tmp_path).labels == (MID, NEW)
    assert sdks_axis(sdks, None, "2.25.100.0", tmp_path).pythons == ("/o/bin/python", "/m/bin/python")
    with pytest.raises(UsageError, match=r"--good '2.2' is not one of the SDKs in"):
        sdks_axis(sdks, "2.2", None, tmp_path)  # 2.2 is none of them (not 2.24, 2.25, 2.26)


def _bisect(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSWEEP_")}
    command = [sys.executable, "-m", "kernelsweep.flows.cli", "bisect", "vector_add", "--shape", "n=65536", *args]
    return subprocess.run(command, cwd=tmp_path, env=env | {"KERNELSWEEP_STATE_DIR": str(tmp_path / "state")},
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_folder_of_fewer_than_two_usable_sdks_is_one_line_and_exit_2(tmp_path):
    _folder(tmp_path / "sdks", ("only", OLD))
    (tmp_path / "sdks" / "broken" / "bin").mkdir(parents=True)  # a venv whose python is gone: not usable
    done = _bisect(tmp_path, "--sdk-folder", "sdks", "--toolchain", "cpu")
    says = "1 usable SDK environment(s) (a venv whose bin/python has neuronx-cc); a bisection needs at least two"
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


def test_sdk_environments_are_not_simulated_builds(tmp_path):
    from kernelsweep.flows.cli.bisect import _builds

    with pytest.raises(UsageError, match="--sdk-folder runs each SDK's own compiler: use --toolchain cpu"):
        _builds(None, tmp_path, "sim", 0, None, None)
    with pytest.raises(UsageError, match="give --builds or --sdk-folder, not both"):
        _builds("2.20.0,2.21.0", tmp_path, "sim", 0, None, None)
