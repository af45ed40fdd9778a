"""Nothing runs from the working folder: `kernelsweep run` started where a user keeps modules named
like its dependencies imports none of them, in any process it starts.

Python puts the working folder first on the import path of `python -m X` and `python -c`, so a
child started that way from a folder holding a `click.py` runs it (Prefect's temporary server,
started as `python -m uvicorn`, did). Every child kernelsweep starts runs with `-P` (or `-I`): the
Prefect server, the simulated tools, the trace worker. The CLI itself appends the folder *last*, for
the user's own kernel modules, so an installed module always wins there.

The planted names are every top-level module of every installed distribution, the few that matter
most named again in case one is missing, and the standard library's (a child with the working folder
first would import a planted `asyncio.py` before the real one). Each planted module writes a marker
file when imported, outside the working folder.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import keyword
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

MUST_PLANT = ("click", "prefect", "uvicorn", "numpy", "pydantic", "pyarrow", "anyio", "httpx", "sqlalchemy", "yaml",
              "rich", "fastapi", "starlette", "boto3", "kernelsweep")  # fmt: skip
SPEC = """
name = "working-folder"
platforms = ["trn2"]
toolchain = "sim"
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [2048] }
"""


def planted_names() -> set[str]:
    installed = set(importlib.metadata.packages_distributions())
    stdlib = {name for name in sys.stdlib_module_names if importlib.util.find_spec(name) is not None}
    return {
        name
        for name in installed | stdlib | set(MUST_PLANT)
        if name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")
    }


def test_a_run_from_a_folder_of_lookalike_modules_imports_none_of_them(tmp_path, prefect_home):
    workdir, markers = tmp_path / "work", tmp_path / "imported"
    workdir.mkdir()
    markers.mkdir()
    names = planted_names()
    assert set(MUST_PLANT) <= names and len(names) > 200
    for name in names:
        (workdir / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n")
    (workdir / "spec.toml").write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "KERNELSWEEP_", "AWS_", "PYTHON"))}
    env |= {
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",  # a loaded CI host starts it slowly
        "KERNELSWEEP_STATE_DIR": str(tmp_path / "state"),
        "KERNELSWEEP_SIM_TIME_SCALE": "0",
    }
    argv = [str(Path(sys.executable).parent / "kernelsweep"), "run", "spec.toml"]
    argv += ["--results", str(tmp_path / "results"), "--artifacts", str(tmp_path / "artifacts")]

    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, done.stderr
    assert "1/1 points done (0 failed)" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in markers.iterdir()) == [], "imported from the working folder"
