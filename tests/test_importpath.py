"""A last-resort folder on the import path (`kernelsweep.importpath`) serves the user's own modules and
nothing that something else on the path provides, namespace packages included."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_last_resort_folder_serves_only_names_nothing_else_provides(tmp_path):
    site, working = tmp_path / "site", tmp_path / "working"
    (site / "nsdemo").mkdir(parents=True)  # a namespace package, as opentelemetry is
    (site / "nsdemo" / "part.py").write_text("WHERE = 'site'\n")
    working.mkdir()
    for name in ("nsdemo", "json", "userkernels"):
        (working / f"{name}.py").write_text(f"WHERE = 'working'\nNAME = {name!r}\n")
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.append({str(site)!r})
        from kernelsweep.importpath import append_last_resort
        append_last_resort([{str(working)!r}])
        import json, nsdemo.part, userkernels
        print(nsdemo.part.WHERE, hasattr(json, "WHERE"), userkernels.WHERE)
        """
    )
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["site", "False", "working"]


def test_a_folder_already_on_the_path_keeps_its_place(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from kernelsweep.importpath import append_last_resort
        append_last_resort([{str(tmp_path)!r}, ""])
        print(sys.path.count({str(tmp_path)!r}), sys.path.index({str(tmp_path)!r}), "" in sys.path)
        """
    )
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0", "False"]


def test_the_working_folder_as_the_empty_path_entry_does_not_recurse(tmp_path):
    """`python -c` puts "" (the working folder) first on the path; the CLI adds that folder again as a
    last resort, and a name nothing provides must still be a plain ModuleNotFoundError."""
    (tmp_path / "userkernels.py").write_text("WHERE = 'working'\n")
    script = textwrap.dedent(
        """
        import os
        from kernelsweep.importpath import append_last_resort
        append_last_resort([os.getcwd()])
        import userkernels
        try:
            import no_such_module_anywhere
        except ModuleNotFoundError:
            print(userkernels.WHERE, "not found")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["working", "not", "found"]
