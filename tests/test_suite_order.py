"""The slow stage's order (tests/conftest.py): its longest tests outside any group are named by module,
so a module renamed, or left with no slow test, would drop back to collection order unnoticed. The
slow stage's collection of only the modules that can hold a slow test; and the hook that tells
`benchmarks/suite_cpu.py --by-test` which test each process runs."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import (
    FIRST_GROUPS,
    LONGEST_FIRST,
    pytest_collection_modifyitems,
    pytest_ignore_collect,
    pytest_runtest_protocol,
)

TESTS = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("suite_cpu", TESTS.parent / "benchmarks" / "suite_cpu.py")
assert _spec and _spec.loader
suite_cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite_cpu)


def test_every_module_named_to_start_first_holds_slow_tests_outside_the_first_groups():
    for name in LONGEST_FIRST:
        source = (TESTS / name).read_text() if (TESTS / name).is_file() else None
        assert source is not None, f"{name}: no such test module; update LONGEST_FIRST in tests/conftest.py"
        assert "pytest.mark.slow" in source, f"{name} holds no slow test; drop it from LONGEST_FIRST"
        assert not any(f'xdist_group("{group}")' in source for group in FIRST_GROUPS), f"{name} is in a group"


def test_under_suite_cpu_each_process_names_the_test_it_runs_and_clears_it_afterwards(tmp_path, monkeypatch):
    """The sampler gives a process's CPU to the test its file names: named while the test runs, and
    emptied after it (the CPU between two tests is no test's), even when the test fails."""
    monkeypatch.setenv(suite_cpu.TESTS_ENV, str(tmp_path))
    mine = tmp_path / str(os.getpid())
    for outcome in (None, AssertionError("the test failed")):
        running = pytest_runtest_protocol(SimpleNamespace(nodeid="tests/test_x.py::test_y"), None)
        next(running)
        assert mine.read_text() == "tests/test_x.py::test_y"
        with pytest.raises(StopIteration if outcome is None else AssertionError):
            running.send(None) if outcome is None else running.throw(outcome)
        assert mine.read_text() == ""


@pytest.mark.parametrize("stage", ["slow", "not slow"])
def test_the_slow_stage_skips_only_the_modules_that_hold_no_slow_test(tmp_path, stage):
    config = SimpleNamespace(getoption=lambda name: stage if name == "markexpr" else None)
    marked = {
        "test_module_marked.py": "pytestmark = pytest.mark.slow\n",
        "test_one_marked.py": "@pytest.mark.slow\ndef test_x(): ...\n",
        "test_from_mark.py": "from pytest import mark\n@mark.slow\ndef test_x(): ...\n",
        "test_unmarked.py": "def test_x(): ...\n",
        "helpers.py": "def helper(): ...\n",
    }
    ignored = set()
    for name, source in marked.items():
        (tmp_path / name).write_text(source)
        if pytest_ignore_collect(tmp_path / name, config):
            ignored.add(name)
    assert ignored == ({"test_unmarked.py"} if stage == "slow" else set())


def test_the_default_stage_fails_on_a_slow_test_the_slow_stage_would_not_collect(tmp_path):
    """The rule above, held where every module is collected: a slow marker given another way (a name
    bound to it) would leave its test out of the slow stage unnoticed."""
    config = SimpleNamespace(getoption=lambda name: "not slow" if name == "markexpr" else None)
    sources = {
        "test_marked.py": "pytestmark = pytest.mark.slow\n",
        "test_aliased.py": "SLOW = getattr(pytest.mark, 'sl' + 'ow')\n@SLOW\ndef test_x(): ...\n",
    }
    items = []
    for name, source in sources.items():
        (tmp_path / name).write_text(source)
        slow = SimpleNamespace(name="slow", args=(), kwargs={})
        items.append(
            SimpleNamespace(path=tmp_path / name, get_closest_marker=lambda m, s=slow: s if m == "slow" else None)
        )
    pytest_collection_modifyitems(config, items[:1])  # marked in words: collected by the slow stage
    with pytest.raises(pytest.UsageError, match="test_aliased.py: slow tests marked without the words `mark.slow`"):
        pytest_collection_modifyitems(config, items)
