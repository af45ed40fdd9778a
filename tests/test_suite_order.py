"""The slow stage's order (tests/conftest.py): its longest tests outside any group are named by module,
so a module renamed, or left with no slow test, would drop back to collection order unnoticed."""

from __future__ import annotations

from pathlib import Path

from conftest import FIRST_GROUPS, LONGEST_FIRST

TESTS = Path(__file__).parent


def test_every_module_named_to_start_first_holds_slow_tests_outside_the_first_groups():
    for name in LONGEST_FIRST:
        source = (TESTS / name).read_text() if (TESTS / name).is_file() else None
        assert source is not None, f"{name}: no such test module; update LONGEST_FIRST in tests/conftest.py"
        assert "pytest.mark.slow" in source, f"{name} holds no slow test; drop it from LONGEST_FIRST"
        assert not any(f'xdist_group("{group}")' in source for group in FIRST_GROUPS), f"{name} is in a group"
