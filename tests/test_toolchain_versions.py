"""Two SDK environments in one sweep (issue 24): `[toolchains]` names two stand-in SDK venvs whose
compilers differ (neuronx-cc 2.24 and 2.25, each asked of its own interpreter), every point runs
under both, and `compare --versions compiler` judges them from that one run."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from standin_host import STAND_INS

from kernelsweep.results import reader

OLD, NEW = "2.24.5133.0+58f8de22", "2.25.100.0+standin"


def _sdk_venv(root: Path, compiler_version: str) -> Path:
    """A venv of this Python without pip, this venv's numpy and ml_dtypes linked in, and the stand-in
    SDK (nki 0.3.0 + neuronxcc.nki_standalone) whose neuronx-cc reports `compiler_version`."""
    venv = root / f"sdk-{compiler_version.split('+')[0]}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    for package in ("numpy", "ml_dtypes"):
        (site / package).symlink_to(Path(importlib.util.find_spec(package).origin).parent)
    for entry in (STAND_INS / "standalone").iterdir():
        (shutil.copytree if entry.is_dir() else shutil.copy)(entry, site / entry.name)
    shutil.copy(STAND_INS / "kernels" / "standin_support.py", site)
    info = site / "neuronx_cc-2.24.5133.0.dist-info"
    metadata = info / "METADATA"
    metadata.write_text(metadata.read_text().replace(OLD, compiler_version))
    info.rename(site / f"neuronx_cc-{compiler_version.split('+')[0]}.dist-info")
    return venv / "bin" / "python"


@pytest.mark.slow
def test_two_named_toolchains_in_one_run_give_compare_versions_verdicts(tmp_path, server_client_env):
    old, new = _sdk_venv(tmp_path, OLD), _sdk_venv(tmp_path, NEW)
    (tmp_path / "spec.toml").write_text(
        'name = "two-sdks"\nplatforms = ["trn2"]\ntoolchain = "cpu"\nresults = "results"\nartifacts = "artifacts"\n'
        f'[toolchains]\n"2.29" = "{old}"\n"2.30" = "{new}"\n'
        '[capture]\nnum_exec = 2\nrepeats = 5\n[[kernels]]\nkernel = "vector_add"\ndtypes = ["bfloat16"]\n'
        "grid = { n = [4096, 8192], partition_size = [128], free_size = [8] }\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_", "KERNELSWEEP_"))}
    env |= {**server_client_env, "KERNELSWEEP_STATE_DIR": str(tmp_path / "state")}
    env |= {"STANDIN_CALLS": str(tmp_path / "calls.jsonl")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "kernelsweep.flows.cli", *args]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)

    ran = cli("run", "spec.toml")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = reader.read(str(tmp_path / "results")).to_pylist()
    assert (
        sorted((r["toolchain_name"], r["compiler_version"]) for r in rows) == [("2.29", OLD)] * 2 + [("2.30", NEW)] * 2
    )
    assert len({r["flow_run_id"] for r in rows}) == 1 and all(r["status"] == "ok" for r in rows)
    compared = cli("compare", "--results", "results", "--versions", "compiler", "2.24", "2.25", "--format", "json")
    assert compared.returncode in (0, 1, 3), compared.stderr  # a verdict's exit code, not a usage error
    verdicts = json.loads(compared.stdout)
    assert len(verdicts["points"]) == 2 and verdicts["only_a"] == verdicts["only_b"] == []
    assert {p["outcome"] for p in verdicts["points"]} <= {"faster", "slower", "same", "inconclusive"}
    assert all(p["ratio"] is not None and p["p_value"] is not None for p in verdicts["points"])
